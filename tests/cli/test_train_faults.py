"""Faults an operator meets with ``textorch seq train`` / ``cls train`` (issue #52): each one line on
stderr, no traceback, exit status 2, or one warning line that says what is true."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, file_size_limit, write_tiny_grobid
from tiny_classification import write_tiny_csv
from textorch.cli.main import main
from textorch.train.output_lock import lock_path, training_output

SEQ_FAST = ["--max-epoch", "1", "--batch-size", "8", "--early-stop", "false"]
CLS_FAST = ["--max-epoch", "1", "--batch-size", "8", "--hidden", "8", "--dense-size", "8", "--word-dim", "8",
            "--architecture", "gru_simple"]


def _one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("textorch: error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0].removeprefix("textorch: error: ")


def _train_command(kind: str, tmp_path: Path, output: Path) -> list[str]:
    if kind == "seq":
        return ["seq", "train", "--train", str(write_tiny_grobid(tmp_path / "train.grobid", 12)),
                "--output", str(output), *SEQ_FAST]
    return ["cls", "train", "--train", str(write_tiny_csv(tmp_path / "train.csv", n=24)), "--output", str(output),
            *CLS_FAST]


# ------------------------------------------------------------- two trainings into one --output
@pytest.mark.parametrize("kind", ["seq", "cls"])
def test_a_second_training_into_an_output_in_use_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                            kind: str) -> None:
    """Before: both runs said "model saved", wrote into one ``checkpoints/``, the second replaced the first."""
    output = tmp_path / "model"
    command = _train_command(kind, tmp_path, output)
    with training_output(output):  # a live run (this process) writes the output
        assert main(command) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert line == (f"{output}: another training is writing this model directory (process {os.getpid()}); "
                        "wait for it to end or give another --output"), line
        assert not output.exists()
    assert not lock_path(output).exists()  # released and removed at the end of the run
    assert main(command) == 0
    assert (output / "config.json").is_file()
    assert not lock_path(output).exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_lock_held_by_a_live_process_refuses_and_a_killed_one_does_not(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    """A real second process holds the output; once it is killed (a crash: no clean-up ran) the
    lock it held is gone with it, and a training goes ahead."""
    output = tmp_path / "model"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom textorch.train.output_lock import training_output\n"
         f"with training_output({str(output)!r}):\n    print('held', flush=True)\n    time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        command = _train_command("seq", tmp_path, output)
        assert main(command) == 2
        assert _one_error_line(capsys.readouterr().err).startswith(
            f"{output}: another training is writing this model directory (process {holder.pid}); ")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert lock_path(output).exists()  # left by the killed run, but no longer locked
    started = time.monotonic()
    assert main(command) == 0
    assert time.monotonic() - started < 300
    assert (output / "config.json").is_file()
    assert not lock_path(output).exists()


# ------------------------------------------------------------------- data with nothing to learn
def test_training_data_whose_every_label_is_other_is_warned_about(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """GROBID data labelled ``<other>`` throughout (a file exported without its fields): one warning
    before training. Before, nothing said so, and the model learned to tag every token ``O``."""
    data = write_tiny_grobid(tmp_path / "train.grobid", 12)
    other = tmp_path / "other.grobid"
    other.write_text("".join(" ".join(line.split()[:-1] + ["I-<other>"]) + "\n" if line.strip() else line + "\n"
                             for line in data.read_text().splitlines()))
    assert main(["seq", "train", "--train", str(other), "--output", str(tmp_path / "model"), *SEQ_FAST]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "nothing to learn" in line]
    assert len(warnings) == 1 and " WARNING " in warnings[0], warnings
    assert warnings[0].endswith(f"{other}: every label of the training data is O (GROBID's <other>: outside any "
                                "field), so there is nothing to learn: the model will tag every token so; check the "
                                "file's label column")
    assert main(["seq", "train", "--train", str(data), "--output", str(tmp_path / "model2"), *SEQ_FAST]) == 0
    assert "nothing to learn" not in capsys.readouterr().err


@pytest.mark.parametrize("early_stop", ["true", "false"])
def test_training_on_a_single_sequence_reports_no_validation_it_does_not_have(
        tmp_path: Path, capsys: pytest.CaptureFixture, early_stop: str) -> None:
    """One sequence cannot be split into training and validation data. Before, each epoch said
    ``valid f1 0.0000`` and two warnings spoke of validation data that did not exist."""
    data = tmp_path / "one.grobid"
    data.write_text("".join(write_tiny_grobid(tmp_path / "all.grobid", 1).read_text().split("\n\n")[0]) + "\n\n")
    assert main(["seq", "train", "--train", str(data), "--output", str(tmp_path / "model"), "--max-epoch", "2",
                 "--early-stop", early_stop]) == 0
    err = capsys.readouterr().err
    assert "— 1 train, 0 valid, 0 test sequences" in err
    assert "valid f1" not in err and "validation score" not in err and "on the validation data" not in err, err
    if early_stop == "true":
        assert f"{data}: 1 training sequence(s), too few to hold out validation data: no early stopping, " \
               "the last epoch is kept" in err, err


# ------------------------------------------------------------------------ a full file system
def _no_hidden_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*") if p.name != ".")


def test_saving_a_model_onto_a_full_disk_names_its_directory(tmp_path: Path) -> None:
    """safetensors' writer said ``SafetensorError: Error while serializing: I/O error: ... (os
    error 28)``, a traceback; now one line naming the model directory, nothing left behind."""
    import torch

    from textorch.errors import ModelFormatError
    from textorch.model_dir import save_model_dir

    target = tmp_path / "model"
    with file_size_limit(50_000), pytest.raises(ModelFormatError) as caught:
        save_model_dir(target, {"task": "sequence_labelling"}, {}, {"w": torch.zeros(100_000)})
    assert str(caught.value) == f"{target}: cannot write the model directory (File too large)"
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_written_onto_a_full_disk_names_its_directory(tmp_path: Path) -> None:
    """``torch.save`` said ``RuntimeError: [enforce fail at inline_container.cc] . unexpected
    pos``, a traceback; now one line naming the checkpoint folder, no temporary folder left."""
    import torch

    from textorch.train.checkpoint import CheckpointError, Checkpointer

    checkpoints = tmp_path / "checkpoints"
    manager = Checkpointer(checkpoints, run={}, run_sha256="0")
    with file_size_limit(50_000), pytest.raises(CheckpointError) as caught:
        manager._write("epoch-1", {}, {"w": torch.zeros(100_000)})
    assert str(caught.value) == f"{checkpoints}: cannot write checkpoint epoch-1 (File too large)"
    assert list(checkpoints.iterdir()) == []


def test_a_training_onto_a_full_disk_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    output = tmp_path / "out" / "model"
    with file_size_limit(20_000):
        code = main(_train_command("seq", tmp_path, output))
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.endswith("(File too large)") and str(output) in line, line
    assert not output.exists() or _no_hidden_files(output) == []


def test_an_export_onto_a_full_disk_says_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``export onnx`` died in a traceback; now one line naming the export folder, none of its
    staging folder left."""
    from model_fixture import v1_model_dir

    model = v1_model_dir(tmp_path / "model")
    out_dir = tmp_path / "exports"
    out_dir.mkdir()
    export = out_dir / "onnx"
    with file_size_limit(10_000):  # model.onnx is 19 kB
        code = main(["export", "onnx", "--model", str(model), "--output", str(export)])
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"{export}: cannot write the export (File too large)", line
    assert list(out_dir.iterdir()) == []


def test_an_export_onto_a_read_only_place_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``export onnx --output DIR`` on a read-only file system (``EROFS``, simulated: root writes
    through file modes): one line naming DIR, exit 2. Before, a traceback."""
    import errno
    import tempfile

    from model_fixture import v1_model_dir

    model = v1_model_dir(tmp_path / "model")
    place = tmp_path / "read-only"
    place.mkdir()
    real_mkdtemp = tempfile.mkdtemp

    def read_only(*args: object, dir: str | Path | None = None, **kwargs: object) -> str:
        if dir is not None and Path(dir) == place:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
        return real_mkdtemp(*args, dir=dir, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    export = place / "onnx"
    assert main(["export", "onnx", "--model", str(model), "--output", str(export)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"{export}: cannot write the export (Read-only file system)", line
