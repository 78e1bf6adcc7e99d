"""``python -m benchmarks``: every runnable script of the suite is listed under one kind, and a
name runs that script with the remaining arguments (so a new script cannot be left out)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks
from benchmarks import __main__ as suite

BENCHMARKS = Path(benchmarks.__file__).resolve().parent
REPO = BENCHMARKS.parent


def _runnable() -> set[str]:
    """Modules of benchmarks/ with a ``__main__`` block, as ``benchmarks.KIND.NAME``."""
    return {".".join(p.relative_to(REPO).with_suffix("").parts) for p in BENCHMARKS.rglob("*.py")
            if p.stem != "__main__" and 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}


def test_every_runnable_script_is_in_its_folders_kind_or_a_runner_once() -> None:
    listed = [name for names in benchmarks.SUITE.values() for name in names]
    assert len(listed) == len(set(listed)), "a benchmark is listed under two kinds"
    runners = {f"benchmarks.{kind}.{name}" for name, kind in benchmarks.RUNNERS.items()}
    assert {benchmarks.module_of(name) for name in listed} | runners == _runnable()
    assert not set(listed) & set(benchmarks.RUNNERS)


def test_the_listing_names_each_benchmark_with_its_docstring_line() -> None:
    text = suite.listing()
    for kind, names in benchmarks.SUITE.items():
        assert f"{kind}:" in text
        for name in names:
            assert suite.summary(name) and f"{name}  " in text


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def _help_sections(text: str) -> dict[str, str]:
    """Benchmark name -> the kind whose section of ``--help`` lists it."""
    found: dict[str, str] = {}
    kind = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.split(":")[0] in benchmarks.SUITE:
            kind = line.split(":")[0]
        elif not line.strip() or not line.startswith("  "):
            kind = None
        elif kind is not None:
            found[line.split()[0]] = kind
    return found


def test_help_lists_every_script_with_a_main_under_its_folder_s_kind() -> None:
    """Walks the files themselves (not ``SUITE``): a script with a ``__main__`` block that
    ``python -m benchmarks --help`` leaves out, or shows under another folder, fails here."""
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    listed = _help_sections(done.stdout)
    scripts = {p for p in BENCHMARKS.rglob("*.py")
               if p.stem != "__main__" and 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}
    assert scripts, "no script found: the walk is broken"
    for path in scripts:
        if path.stem in benchmarks.RUNNERS:
            assert f"{path.parent.name}/{path.stem}" in done.stdout  # on the runners' line
            continue
        folder = "setup" if path.parent == BENCHMARKS else path.parent.name
        assert listed.get(path.stem) == folder, f"{path.relative_to(REPO)} is not listed under {folder}:"


def test_a_name_runs_that_script_with_the_remaining_arguments() -> None:
    done = _run("pooled_f1", "--help")
    assert done.returncode == 0, done.stderr
    assert "pooled over seeds" in done.stdout and "--output" in done.stdout


@pytest.mark.parametrize("args", [("no_such_benchmark",), ("common",), ("textorch_runner",)])
def test_a_name_outside_the_suite_is_refused_with_the_listing(args: tuple[str, ...]) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert f"no benchmark named {args[0]!r}" in done.stderr and "peers:" in done.stderr
