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


def test_a_name_runs_that_script_with_the_remaining_arguments() -> None:
    done = _run("pooled_f1", "--help")
    assert done.returncode == 0, done.stderr
    assert "pooled over seeds" in done.stdout and "--output" in done.stdout


@pytest.mark.parametrize("args", [("no_such_benchmark",), ("common",), ("textorch_runner",)])
def test_a_name_outside_the_suite_is_refused_with_the_listing(args: tuple[str, ...]) -> None:
    done = _run(*args)
    assert done.returncode == 2
    assert f"no benchmark named {args[0]!r}" in done.stderr and "peers:" in done.stderr
