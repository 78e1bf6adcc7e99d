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


# ------------------------------------------------------------------------------- bad options
@pytest.mark.parametrize("engine", ["torch", "onnx", "auto"])
@pytest.mark.parametrize("batch_size", ["0", "-3"])
def test_a_batch_size_below_one_is_a_config_error_for_every_engine(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, engine: str, batch_size: str,
) -> None:
    text = tmp_path / "in.txt"
    text.write_text("".join(f"June {day} , 2005\n" for day in range(1, 40)))
    out = tmp_path / "out.json"
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(out), "--device", "cpu",
                 "--engine", engine, "--batch-size", batch_size]) == 2
    assert _one_error_line(capsys.readouterr().err) == f"--batch-size must be >= 1, got {batch_size}"
    assert sorted(tmp_path.iterdir()) == [text]


@pytest.mark.parametrize("command", [["seq", "eval", "--test", "t"], ["cls", "classify", "--input", "t"],
                                     ["cls", "eval", "--test", "t"]])
def test_the_other_commands_that_run_a_saved_model_refuse_a_batch_size_of_zero_too(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: list[str],
) -> None:
    assert main([*command, "--model", str(tmp_path / "no-model"), "--batch-size", "0"]) == 2
    assert _one_error_line(capsys.readouterr().err) == "--batch-size must be >= 1, got 0"


@pytest.mark.parametrize("engine", ["torch", "onnx"])
def test_a_model_option_naming_a_file_says_it_is_not_a_model_directory(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, engine: str,
) -> None:
    text = tmp_path / "in.txt"
    text.write_text("June 12 , 2005\n")
    for not_a_model in (text, model / "config.json"):
        assert main(["seq", "tag", "--model", str(not_a_model), "--input", str(text), "--device", "cpu",
                     "--engine", engine]) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert line == f"{not_a_model}: not a model directory (it is a file; give the model's folder)", line
    assert main(["seq", "tag", "--model", str(tmp_path / "missing"), "--input", str(text), "--device", "cpu"]) == 2
    assert _one_error_line(capsys.readouterr().err) == f"{tmp_path / 'missing'}: not a model directory (it does not exist)"


def test_tagging_into_the_input_file_is_refused_naming_both(model: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "in.txt"
    content = "June 12 , 2005\nMay 3 , 1999\n"
    text.write_text(content)
    (tmp_path / "link.txt").symlink_to(text)
    os.link(text, tmp_path / "hard.txt")
    for output in (text, tmp_path / "." / "in.txt", tmp_path / "link.txt", tmp_path / "hard.txt"):
        assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(output),
                     "--device", "cpu"]) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert line == f"--output {output} is the input file --input {text}: the output would replace it; " \
                       "write the output elsewhere", line
        assert text.read_text() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.txt", "in.txt", "link.txt"]
    # grobid MODEL tag, whose output option is --tag-output, and cls classify say the same
    assert main(["grobid", "date", "tag", "--output", str(model), "--input", str(text), "--input-format", "text",
                 "--tag-output", str(text), "--device", "cpu"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith(f"--tag-output {text} is the input file --input {text}: ")
    assert main(["cls", "classify", "--model", str(tmp_path / "no-model"), "--input", str(text),
                 "--output", str(text)]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith(f"--output {text} is the input file --input {text}: ")
    assert text.read_text() == content
