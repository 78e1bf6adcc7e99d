"""Atomic save: an interrupted save leaves the previous model intact and no debris."""

from __future__ import annotations

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
