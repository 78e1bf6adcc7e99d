"""Faults an operator meets with ``textorch seq tag`` (issue #52): each one line on stderr, no
traceback, exit status 2, and nothing read or written that should not be.

The runs that could hang or grow without bound if the fault came back (``/dev/zero``, a FIFO)
go in a child process with a time limit and a cap on its memory, so that a regression fails
the test instead of stalling the suite or the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, cli_trained_tagger, write_tiny_grobid
from textorch.cli.main import main

MEMORY_CAP = 3 << 30
"""Address space of a child ``textorch`` process: room for torch, not for reading /dev/zero whole."""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GROBID tagger with feature columns: the kind whose text input is looked at first."""
    root = tmp_path_factory.mktemp("faults")
    return cli_trained_tagger(root / "model", write_tiny_grobid(root / "train.grobid", 24))


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _textorch(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``textorch ARGV`` in a child process, its memory capped, killed after ``timeout`` seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "textorch.cli.main", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=_cap_memory)


def _one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("textorch: error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0].removeprefix("textorch: error: ")


# --------------------------------------------------------------- input that is not a regular file
@pytest.mark.parametrize("input_format", ["text", "grobid", "conll"])
def test_tagging_dev_zero_is_refused_before_anything_is_read(model: Path, tmp_path: Path, input_format: str) -> None:
    out = tmp_path / "out"
    done = _textorch("seq", "tag", "--model", str(model), "--input", "/dev/zero", "--input-format", input_format,
                     "--output", str(out), "--device", "cpu")
    assert done.returncode == 2, done.stderr
    assert _one_error_line(done.stderr) == "/dev/zero: not a regular file"
    assert list(tmp_path.iterdir()) == []  # no output, no temporary file


def test_tagging_a_fifo_is_refused_without_opening_it(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)  # no writer: opening it to read would wait forever
    out = tmp_path / "out.json"
    done = _textorch("seq", "tag", "--model", str(model), "--input", str(fifo), "--output", str(out), "--device", "cpu")
    assert done.returncode == 2, done.stderr
    assert _one_error_line(done.stderr) == f"{fifo}: not a regular file"
    assert list(tmp_path.iterdir()) == [fifo]


def test_the_look_at_the_first_lines_reads_a_bounded_part(model: Path, tmp_path: Path) -> None:
    """A regular file without a line end (a binary file given by mistake) is not read whole by
    the look at its first lines: only :data:`SNIFF_CHARS` of it."""
    from textorch.tagging import tag_files

    big = tmp_path / "one-line"
    with open(big, "w", encoding="utf-8") as handle:
        for _ in range(4):
            handle.write("x" * tag_files.SNIFF_CHARS)
    assert tag_files._leading_fields(str(big), 3) == []
    short = tmp_path / "short"
    short.write_text("a b\n\nc d e\n")
    assert tag_files._leading_fields(str(short), 3) == [["a", "b"], ["c", "d", "e"]]
