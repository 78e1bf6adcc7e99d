"""Atomic save: an interrupted save leaves the previous model intact and no debris."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from textorch import model_dir
from textorch.errors import ModelFormatError


def _save(target: Path, value: float) -> None:
    model_dir.save_model_dir(target, {"task": "t"}, {"v": 1}, {"w": torch.full((3,), value)})


def test_save_then_load_round_trip(tmp_path: Path) -> None:
    _save(tmp_path / "m", 1.5)
    config, vocab, state = model_dir.load_model_dir(tmp_path / "m")
    assert config["task"] == "t" and vocab == {"v": 1}
    assert torch.equal(state["w"], torch.full((3,), 1.5))


def test_interrupted_save_keeps_previous_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "m"
    _save(target, 1.0)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(model_dir, "_fsync_dir", crash)
    with pytest.raises(KeyboardInterrupt):
        _save(target, 2.0)
    _, _, state = model_dir.load_model_dir(target)
    assert torch.equal(state["w"], torch.full((3,), 1.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_overwrite_replaces_whole_directory(tmp_path: Path) -> None:
    target = tmp_path / "m"
    _save(target, 1.0)
    (target / "stale.txt").write_text("old")
    _save(target, 3.0)
    assert not (target / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize("missing", ["config.json", "vocab.json", "model.safetensors"])
def test_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    _save(tmp_path / "m", 1.0)
    (tmp_path / "m" / missing).unlink()
    with pytest.raises(ModelFormatError, match=missing.replace(".", r"\.")):
        model_dir.load_model_dir(tmp_path / "m")


def test_unwritable_output_fails_early(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        if not __import__("os").access(locked, __import__("os").W_OK):
            with pytest.raises(ModelFormatError, match="cannot write"):
                model_dir.check_writable(locked / "model")
        else:  # running as root: permissions are not enforced, check the file-in-the-way case instead
            (tmp_path / "file").write_text("x")
            with pytest.raises(ModelFormatError, match="not a directory"):
                model_dir.check_writable(tmp_path / "file")
    finally:
        locked.chmod(0o755)


# ------------------------------------------------------------------ modes: the umask's, for every account
@pytest.fixture(params=[0o022, 0o027], ids=["umask022", "umask027"])
def umask(request: pytest.FixtureRequest):
    """The process umask for one test, set back afterwards."""
    before = os.umask(request.param)
    yield request.param
    os.umask(before)


def _modes_not_from(umask: int, root: Path) -> list[str]:
    """Every file and folder under ``root`` (itself included) whose mode is not what ``open``
    and ``mkdir`` give under ``umask``, as ``path mode``."""
    wrong = []
    for path in [root, *root.rglob("*")]:
        expected = (0o777 if path.is_dir() else 0o666) & ~umask
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode != expected:
            wrong.append(f"{path.relative_to(root.parent)} {oct(mode)} (expected {oct(expected)})")
    return wrong


def test_a_saved_model_directory_follows_the_umask(tmp_path: Path, umask: int) -> None:
    _save(tmp_path / "m", 1.0)
    model_dir.save_model_dir(tmp_path / "m2", {"task": "t"}, {"v": 1}, {"w": torch.zeros(2)},
                             extra_files={"sub/notes.txt": "x", "blob.bin": b"\0"})
    assert _modes_not_from(umask, tmp_path / "m") == []
    assert _modes_not_from(umask, tmp_path / "m2") == []


def test_a_trained_model_and_its_onnx_export_follow_the_umask(tmp_path: Path, umask: int) -> None:
    """What ``seq train`` writes (weights, config, history, curves) and ``export onnx`` adds
    (``onnx/``, staged in a ``mkdtemp`` folder), readable by another account under umask 022."""
    from conftest import cli_trained_tagger, write_tiny_grobid
    from textorch.cli.main import main

    model = cli_trained_tagger(tmp_path / "model", write_tiny_grobid(tmp_path / "train.grobid", 12))
    assert main(["export", "onnx", "--model", str(model)]) == 0
    assert (model / "onnx").is_dir()
    assert _modes_not_from(umask, model) == []


def test_the_umask_is_read_without_changing_it() -> None:
    from textorch.runtime.file_modes import current_umask

    before = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert os.umask(0o027) == 0o027  # still in force
    finally:
        os.umask(before)


def test_the_umask_is_read_and_set_back_where_proc_does_not_say_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.runtime import file_modes

    def no_proc(*args, **kwargs):
        raise FileNotFoundError("/proc/self/status")

    monkeypatch.setattr(file_modes, "open", no_proc, raising=False)
    before = os.umask(0o027)
    try:
        assert file_modes.current_umask() == 0o027
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(before)
