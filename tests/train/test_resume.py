"""Checkpoints and ``--resume`` (issue 8): a run killed with SIGKILL and resumed ends with the
weights of an uninterrupted run, bit for bit, with one process and with ``--devices 2``.

The killed runs are the real command in a subprocess, killed (with every process it started)
as soon as a checkpoint taken in the middle of an epoch appears; the uninterrupted reference
and the resumed run go through the same entry point (``main``, in the test's process), with one
CPU thread per process so that the kernels round identically.
"""

from __future__ import annotations

import contextlib

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import REPO, write_tiny_conll
from tiny_classification import write_tiny_csv
from textorch.cli.main import main
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.readers import read_conll
from textorch.errors import TextorchError
from textorch.tagging.labeler import SequenceLabeler
from textorch.train.checkpoint import (
    FINAL,
    STATE_FILE,
    Checkpointer,
    CheckpointError,
    list_checkpoints,
    read_checkpoint,
    resume_progress,
)
from textorch.train.dist import DistContext
from textorch.train.trainer import Trainer, adam

pytestmark = pytest.mark.processes  # see tests/conftest.py: scheduled first

SEQ = ["--max-epoch", "3", "--batch-size", "4", "--learning-rate", "0.02", "--seed", "5", "--dropout", "0.3",
       "--lr-decay", "0.5", "--lr-decay-patience", "0",  # cuts, replayed from the history on resume
       "--threads", "1", "--checkpoint-every-steps", "4"]
CLS = ["--max-epoch", "3", "--batch-size", "4", "--learning-rate", "0.01", "--seed", "3", "--hidden", "8",
       "--dense-size", "8", "--word-dim", "8", "--architecture", "gru_simple", "--threads", "1", "--fold-count", "2",
       "--checkpoint-every-steps", "3"]


@pytest.fixture(autouse=True)
def restore_threads():
    """``--threads 1`` in an in-process run changes the process-wide setting: put it back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _weights(model: Path) -> dict[str, torch.Tensor]:
    return load_file(str(model / "model.safetensors"))


def _assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert different == [], f"weights differ: {different[:5]}"


def _mid_epoch_checkpoint(root: Path) -> Path | None:
    """A finished checkpoint taken after some steps of an epoch (not at its end)."""
    for path in list_checkpoints(root):
        if path.name != FINAL and not path.name.endswith("s00000000"):
            return path
    return None


def _processes_with(mark: str) -> list[int]:
    """Live processes whose environment carries ``mark``: the command and every worker it started
    (the launcher starts its workers in sessions of their own, out of reach of ``killpg``)."""
    found, needle = [], f"TEXTORCH_TEST_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in environ.split(b"\0") and state != "Z":
                found.append(int(entry.name))
    return found


def _kill_all(mark: str) -> None:
    deadline = time.monotonic() + 30
    while pids := _processes_with(mark):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert time.monotonic() < deadline, f"processes {pids} survive SIGKILL"
        time.sleep(0.01)


def _start(args: list[str], mark: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TEXTORCH_TEST_MARK": mark}
    return subprocess.Popen([sys.executable, "-m", "textorch.cli.main", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill_at_first_checkpoint(args: list[str], root: Path, reference: list[str]) -> Path:
    """Run the uninterrupted ``reference`` command to completion in this process (as the resumed
    run goes, through ``main``: one interpreter start less), then ``textorch ARGS`` in a process
    of its own until a mid-epoch checkpoint appears under ``root``, and SIGKILL it and every
    process it started; returns the checkpoint seen."""
    assert main(reference) == 0
    mark = uuid.uuid4().hex
    process = _start(args, mark)
    try:
        deadline = time.monotonic() + 120
        while (seen := _mid_epoch_checkpoint(root)) is None:
            assert process.poll() is None, f"the run ended before a checkpoint: {process.stderr.read()}"
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.005)
    finally:
        _kill_all(mark)
        process.wait(timeout=30)
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    return seen


@pytest.fixture(scope="module")
def conll(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_conll(tmp_path_factory.mktemp("resume") / "train.conll", n=40)


def _seq_resume_scenario(conll: Path, tmp_path: Path, capfd: pytest.CaptureFixture, devices: str) -> Path:
    """Reference run, killed run, resumed run: the resumed model equals the reference bit for bit."""
    common = ["seq", "train", "--train", str(conll), *SEQ, "--devices", devices]
    reference = tmp_path / "reference"
    model = tmp_path / "model"
    args = [*common, "--output", str(model)]
    seen = _kill_at_first_checkpoint(args, model / "checkpoints", [*common, "--output", str(reference)])
    assert not (model / "model.safetensors").exists(), "killed too late: the run had finished"
    assert json.loads((seen / "checkpoint.json").read_text())["position"]["step"] > 0
    capfd.readouterr()
    assert main([*args, "--resume"]) == 0
    assert "resuming from" in capfd.readouterr().err
    _assert_bitwise_equal(_weights(model), _weights(reference))
    assert not (model / "checkpoints").exists() and not (tmp_path / "model.checkpoints").exists()
    return model


def _epochs(model: Path) -> list[tuple]:
    """(epoch, loss, validation score) of each epoch, from the model's training history."""
    runs = json.loads((model / "history.json").read_text())["runs"]
    return [(e["epoch"], e["loss"], e["valid_score"]) for run in runs for e in run["epochs"]]


def test_killed_run_resumes_to_identical_weights(conll: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    model = _seq_resume_scenario(conll, tmp_path, capfd, "1")
    if (model / "history.json").exists():  # the epoch records carried across the kill, to the last bit
        assert _epochs(model) == _epochs(tmp_path / "reference") and len(_epochs(model)) == 3
    args = ["seq", "train", "--train", str(conll), *SEQ, "--devices", "1", "--output", str(model)]
    before = (model / "model.safetensors").stat().st_mtime_ns
    assert main([*args, "--resume"]) == 0  # nothing left to do: said so, the model untouched
    assert "training had already finished" in capfd.readouterr().err
    assert (model / "model.safetensors").stat().st_mtime_ns == before


def test_killed_two_process_run_resumes_to_identical_weights(conll: Path, tmp_path: Path,
                                                             capfd: pytest.CaptureFixture) -> None:
    _seq_resume_scenario(conll, tmp_path, capfd, "2")


def test_resume_refusals(conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Checkpoints of an earlier run are never silently discarded or continued with other settings."""
    model = tmp_path / "model"
    args = ["seq", "train", "--train", str(conll), *SEQ, "--output", str(model)]
    assert main([*args, "--max-epoch", "1", "--keep-checkpoints"]) == 0
    kept = tmp_path / "model.checkpoints"
    assert kept.is_dir() and "checkpoints" not in {p.name for p in model.iterdir()}
    capsys.readouterr()
    assert main(args) == 2  # the same command without --resume would start over: refused
    assert f"{kept} holds checkpoints of an earlier run: add --resume to continue it" in capsys.readouterr().err
    assert main([*("0.03" if a == "0.02" else a for a in args), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "belong to another run" in err and "train.learning_rate was 0.02, is now 0.03" in err
    assert "train.max_epoch was 1, is now 3" in err
    changed = tmp_path / "changed.conll"
    changed.write_text(conll.read_text().replace("Paris", "Lyon"))
    assert main([*(str(changed) if a == str(conll) else a for a in args), "--max-epoch", "1", "--resume"]) == 2
    assert "files.train has changed (different content)" in capsys.readouterr().err


def test_classifier_ensemble_resumes_inside_its_second_member(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Killed while member 2 of 2 trains: member 1 is taken from its final checkpoint, member 2
    continues mid-epoch; the ensemble equals an uninterrupted one."""
    data = write_tiny_csv(tmp_path / "train.csv", n=120)
    common = ["cls", "train-eval", "--train", str(data), *CLS]
    reference, model = tmp_path / "reference", tmp_path / "model"
    _kill_at_first_checkpoint([*common, "--output", str(model)], model / "checkpoints" / "member-1",
                              [*common, "--output", str(reference)])
    assert (model / "checkpoints" / "member-0" / FINAL).is_dir()
    capsys.readouterr()
    assert main([*common, "--output", str(model), "--resume", "--keep-checkpoints"]) == 0
    err = capsys.readouterr().err
    assert "training had already finished" in err and "resuming from" in err
    _assert_bitwise_equal(_weights(model), _weights(reference))
    assert json.loads((model / "config.json").read_text())["thresholds"] == json.loads(
        (reference / "config.json").read_text())["thresholds"]
    kept = tmp_path / "model.checkpoints"  # kept beside the model directory, never inside it
    assert not (model / "checkpoints").exists()
    assert sorted(p.name for p in kept.iterdir()) == ["member-0", "member-1"]


def test_train_eval_without_output_uses_checkpoint_dir(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    conll = write_tiny_conll(tmp_path / "t.conll", n=30)
    args = ["seq", "train-eval", "--train", str(conll), "--max-epoch", "2", "--batch-size", "8", "--threads", "1"]
    assert main([*args, "--resume"]) == 2
    assert "--resume needs --output or --checkpoint-dir" in capsys.readouterr().err
    directory = tmp_path / "ck"
    assert main([*args, "--checkpoint-dir", str(directory)]) == 0
    first = capsys.readouterr().out
    assert sorted(p.name for p in directory.iterdir()) == ["complete.json"]  # checkpoints gone, completion noted
    assert main([*args, "--checkpoint-dir", str(directory), "--resume"]) == 0
    captured = capsys.readouterr()
    assert "training had already finished" in captured.err and captured.out == first  # the recorded scores


# ------------------------------------------------------------------ the checkpointer itself
TINY = ModelConfig(char_dim=4, char_hidden=4, word_hidden=4, dropout=0.0)


def _fit(tmp_path: Path, checkpointer: Checkpointer, max_epoch: int = 3) -> None:
    corpus = read_conll(write_tiny_conll(tmp_path / "t.conll", n=12))
    labeler = SequenceLabeler.build(corpus, TINY, DataConfig(), None, "cpu", seed=1)
    data = labeler.encode(corpus.sequences, with_labels=True)
    config = TrainConfig(batch_size=4, max_epoch=max_epoch, early_stop=False)
    Trainer(labeler.model, config, torch.device("cpu"), checkpoints=checkpointer).fit(data)


def test_keeps_the_last_k_and_state_loads_with_weights_only(tmp_path: Path) -> None:
    checkpointer = Checkpointer(tmp_path / "ck", {"run": 1}, "abc", keep_last=2, every_steps=2)
    _fit(tmp_path, checkpointer)
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    # 3 steps per epoch, 3 epochs: step checkpoints at steps 2, 4, 8 and epoch ends 1, 2; the last two stay
    assert names == ["e00003-s00000000", "e00003-s00000002", FINAL]
    state = torch.load(tmp_path / "ck" / "e00003-s00000002" / STATE_FILE, weights_only=True)
    assert set(state) >= {"model", "optimizer", "rng", "partial_epoch_totals"}
    meta = json.loads((tmp_path / "ck" / "e00003-s00000002" / "checkpoint.json").read_text())
    assert meta["position"] == {"epoch": 3, "step": 2, "global_step": 8} and len(meta["history"]) == 2


def _same(a, b) -> bool:
    """Equal nested states, tensors compared bit for bit."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_the_trainer_state_goes_through_the_checkpointer_as_a_dict(tmp_path: Path) -> None:
    """The trainer gives and takes its state (weights, optimizer, scheduler, scaler); the
    checkpointer writes and reads that dict without reaching into a trainer."""
    corpus = read_conll(write_tiny_conll(tmp_path / "t.conll", n=12))
    config = TrainConfig(batch_size=4, max_epoch=2, early_stop=False)
    first, second = (SequenceLabeler.build(corpus, TINY, DataConfig(), None, "cpu", seed=s) for s in (1, 2))
    data = first.encode(corpus.sequences, with_labels=True)
    trained = Trainer(first.model, config, torch.device("cpu"), checkpoints=Checkpointer(tmp_path / "ck", {}, "x"))
    trained.fit(data)
    snapshot = read_checkpoint(tmp_path / "ck" / "e00002-s00000000")  # after epoch 1 of 3 steps
    state, progress = resume_progress(snapshot, DistContext())
    assert set(state) == set(trained.state_dict()) == {"model", "optimizer", "scheduler", "scaler"}
    assert (progress.epoch, progress.step, progress.global_step) == (2, 0, 3)
    assert _same(state["model"], snapshot.state["model"]) and state["optimizer"]["state"]
    fresh = Trainer(second.model, config, torch.device("cpu"))
    fresh.optimizer, fresh.scheduler = adam(fresh.model, config, 6)
    assert not _same(fresh.state_dict()["model"], state["model"])
    fresh.load_state_dict(state)
    assert _same(fresh.state_dict(), state)


def test_damaged_newest_checkpoint_is_skipped_and_other_runs_refused(tmp_path: Path, caplog) -> None:
    _fit(tmp_path, Checkpointer(tmp_path / "ck", {"run": 1}, "abc", keep_last=3))
    (tmp_path / "ck" / FINAL / STATE_FILE).write_bytes(b"truncated")
    chooser = Checkpointer(tmp_path / "ck", {"run": 1}, "abc", resume=True)
    assert chooser._choose().name == "e00003-s00000000"
    assert "skipping damaged checkpoint" in caplog.text
    other = Checkpointer(tmp_path / "ck", {"run": 2}, "def", resume=True)
    with pytest.raises(CheckpointError, match="run was 1, is now 2"):
        other._choose()
    assert issubclass(CheckpointError, TextorchError)


def test_a_failed_write_leaves_no_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpointer = Checkpointer(tmp_path / "ck", {}, "x")

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", fail)
    with pytest.raises(CheckpointError, match="No space left on device"):
        checkpointer._write("e00001-s00000000", {}, {"a": torch.zeros(1)})
    assert list((tmp_path / "ck").iterdir()) == []


def _one_error_line(err: str) -> str:
    """The ``textorch: error:`` line of a failed command, which must be its only one, with no traceback."""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("textorch: error: "), err[-2000:]
    return errors[0]


def _training_command(command: str, tmp_path: Path, model: Path) -> list[str]:
    if command == "seq":
        return ["seq", "train", "--train", str(write_tiny_conll(tmp_path / "train.conll", n=24)), "--output", str(model),
                *SEQ]
    options = [o for o in CLS if o not in ("--fold-count", "2")]
    return ["cls", "train", "--train", str(write_tiny_csv(tmp_path / "train.csv", n=24)), "--output", str(model), *options]


@pytest.mark.parametrize("command", ["seq", "cls"])
def test_a_failed_checkpoint_write_mid_training_is_one_line_and_exit_2(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Disk full (or a file system that turned read-only) at the second checkpoint: the command
    stops there, names the checkpoint directory, and exits 2 without a traceback."""
    model = tmp_path / "model"
    written = []
    original = torch.save

    def full_disk_at_the_second(obj, path, *args, **kwargs):
        written.append(path)
        if len(written) == 2:
            raise OSError(28, "No space left on device", str(path))
        return original(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk_at_the_second)
    capsys.readouterr()
    assert main(_training_command(command, tmp_path, model)) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"{model / 'checkpoints'}: cannot write checkpoint " in line and "No space left on device" in line
    assert len(written) == 2 and not (model / "model.safetensors").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc, a pseudo file system")
@pytest.mark.parametrize("command", ["seq", "cls"])
def test_a_checkpoint_directory_that_cannot_be_made_is_one_line_and_exit_2(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """With the output check out of the way (as when a file system turns read-only during the
    run), the first checkpoint cannot create its directory: one line naming it, exit 2."""
    from textorch.train import run as runs  # the run of both tasks

    monkeypatch.setattr(runs, "check_writable", lambda output: None)
    monkeypatch.setattr(runs, "training_output", lambda output, ctx=None: contextlib.nullcontext())  # its lock too
    model = Path(f"/proc/textorch-test-{command}-x")
    capsys.readouterr()
    assert main(_training_command(command, tmp_path, model)) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"textorch: error: {model / 'checkpoints'}: cannot write checkpoint "), line


@pytest.mark.parametrize("command", ["seq", "cls"])
def test_a_failed_model_directory_write_is_one_line_and_exit_2(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import safetensors.torch  # what the model directory writes its weights with (imported when writing)

    def full_disk(tensors, filename, *args, **kwargs):
        raise OSError(28, "No space left on device", filename)

    model = tmp_path / "model"
    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    capsys.readouterr()
    assert main([*_training_command(command, tmp_path, model), "--max-epoch", "1"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"textorch: error: {model}: cannot write the model directory (No space left on device)"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".model")] == []  # no half-written directory


def test_a_failed_checkpoint_cleanup_after_training_is_one_line_and_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The checkpoints of a finished run cannot be deleted (a file system gone read-only)."""
    from textorch.train import resume

    def read_only(place: Path) -> None:
        raise OSError(30, "Read-only file system", str(place))

    model = tmp_path / "model"
    monkeypatch.setattr(resume, "_remove_checkpoints", read_only)
    capsys.readouterr()
    assert main([*_training_command("seq", tmp_path, model), "--max-epoch", "1"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"textorch: error: {tmp_path / 'model.checkpoints'}: cannot finish the checkpoints"), line
    assert "Read-only file system" in line
