"""The cyclic garbage collector is off during a tagging call and back as it was afterwards."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest

from textorch.runtime.gc_pause import gc_paused
from textorch.tagging.labeler import SequenceLabeler


@pytest.fixture(autouse=True)
def _collector_restored():
    was_enabled = gc.isenabled()
    yield
    gc.enable() if was_enabled else gc.disable()


def _spy_labeler(seen: list[bool]) -> SimpleNamespace:
    """Just what ``SequenceLabeler.predict`` touches, recording the collector's state while it decodes."""

    def decode(data, batch_size, ctx, with_scores=True):
        seen.append(gc.isenabled())
        return ["decoded"]

    return SimpleNamespace(word_table=None, encode=lambda sequences: sequences, _decode=decode)


def test_predict_runs_with_the_collector_off_and_switches_it_back_on() -> None:
    gc.enable()
    seen: list[bool] = []
    assert SequenceLabeler.predict(_spy_labeler(seen), ["a sequence"]) == ["decoded"]
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_program_stays_off() -> None:
    gc.disable()
    seen: list[bool] = []
    SequenceLabeler.predict(_spy_labeler(seen), ["a sequence"])
    assert seen == [False] and not gc.isenabled()


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
