"""The garbage collector is paused only where a command asks for it, and comes back as it was."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from textorch.cli.main import main
from textorch.data.corpus import TokenSequence
from textorch.runtime.gc_pause import gc_paused, without_gc_pauses
from textorch.tagging.labeler import SequenceLabeler


@pytest.fixture(autouse=True)
def _collector_restored():
    was_enabled = gc.isenabled()
    yield
    gc.enable() if was_enabled else gc.disable()


def _spy_on_predict(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The collector's state inside each tagging call, where the network runs (which it still does)."""
    seen: list[bool] = []
    real = SequenceLabeler._decode

    def spy(self, *args, **kwargs):
        seen.append(gc.isenabled())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SequenceLabeler, "_decode", spy)
    return seen


def test_the_library_leaves_the_collector_on_and_the_tag_command_pauses_it(
    tiny_conll: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc.enable()
    model = tmp_path / "model"
    labeler = SequenceLabeler.train(tiny_conll, output=model, max_epoch=1, word_hidden=8, char_hidden=4)
    seen = _spy_on_predict(monkeypatch)
    labeler.predict([TokenSequence("John lives in Paris .".split())])
    assert seen == [True]
    text = tmp_path / "in.txt"
    text.write_text("John lives in Paris .\n")
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(tmp_path / "out.json")]) == 0
    assert seen == [True, False]
    assert gc.isenabled()


def test_the_collector_comes_back_after_an_exception_and_in_nested_pauses() -> None:
    gc.enable()
    with pytest.raises(RuntimeError):
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("tagging failed")
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause found it off: leaves it off
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_program_stays_off() -> None:
    gc.disable()
    seen: list[bool] = []
    without_gc_pauses(lambda: seen.append(gc.isenabled()))()
    assert seen == [False] and not gc.isenabled()
