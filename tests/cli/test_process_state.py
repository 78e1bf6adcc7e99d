"""The command line changes this process's state only where asked: the allocator with
``--tune-allocator``, the cyclic garbage collector with ``--pause-collector`` (for the command
only: its state comes back afterwards)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from textorch.cli.main import main
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler


@pytest.fixture(autouse=True)
def _collector_restored():
    was_enabled = gc.isenabled()
    yield
    gc.enable() if was_enabled else gc.disable()


def test_the_tag_and_eval_commands_leave_the_collector_on(tiny_conll: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    model = tmp_path / "model"
    train_sequence_labeler(tiny_conll, output=model, max_epoch=1, word_hidden=8, char_hidden=4)
    switched_off: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: switched_off.append("gc.disable"))
    text = tmp_path / "in.txt"
    text.write_text("John lives in Paris .\nShe went to Berlin .\n")
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(tmp_path / "out.json")]) == 0
    assert main(["seq", "eval", "--model", str(model), "--test", str(tiny_conll)]) == 0
    assert switched_off == [] and gc.isenabled()


@pytest.mark.parametrize("asked", [False, True])
def test_the_command_line_tunes_the_allocator_only_when_asked(asked: bool, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    calls: list[int] = []
    monkeypatch.setattr("textorch.cli.main.keep_freed_memory", lambda: calls.append(1) or True)
    option = ["--tune-allocator"] if asked else []
    assert main([*option, "seq", "tag", "--model", str(tmp_path / "missing"), "--input", str(tmp_path / "none.txt")]) == 2
    assert calls == ([1] if asked else [])


@pytest.mark.parametrize("command, trains", [
    (["seq", "train", "--train", "none.txt", "--output", "m"], True),
    (["seq", "train-eval", "--train", "none.txt"], True),
    (["cls", "train", "--train", "none.txt", "--output", "m"], True),
    (["grobid", "date", "train", "--input", "none.txt", "--output", "m"], True),
    (["seq", "tag", "--model", "missing", "--input", "none.txt"], False),
    (["grobid", "date", "tag", "--input", "none.txt", "--output", "missing"], False),
])
def test_training_commands_bound_the_heap_others_do_not(command: list[str], trains: bool,
                                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[int] = []
    monkeypatch.setattr("textorch.cli.main.bound_heap_growth", lambda: calls.append(1) or True)
    monkeypatch.chdir(tmp_path)
    assert main(command) != 0  # the input is missing: what counts is what ran before the command
    assert calls == ([1] if trains else [])


@pytest.mark.parametrize("asked", [False, True])
def test_the_collector_pauses_for_the_command_only_when_asked(asked: bool, tiny_conll: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    model = tmp_path / "model"
    train_sequence_labeler(tiny_conll, output=model, max_epoch=1, word_hidden=8, char_hidden=4)
    seen: list[bool] = []
    load = SequenceLabeler.load.__func__

    def load_and_look(cls, *args, **kwargs):  # runs inside the command
        seen.append(gc.isenabled())
        return load(cls, *args, **kwargs)

    monkeypatch.setattr(SequenceLabeler, "load", classmethod(load_and_look))
    option = ["--pause-collector"] if asked else []
    assert main([*option, "seq", "eval", "--model", str(model), "--test", str(tiny_conll)]) == 0
    assert seen == [not asked]
    assert gc.isenabled()  # back as it was, for whoever called main() in this process
    gc.disable()
    assert main([*option, "seq", "eval", "--model", str(model), "--test", str(tiny_conll)]) == 0
    assert not gc.isenabled()  # a collector the caller had switched off stays off


def test_sigterm_stops_a_command_as_ctrl_c_only_while_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line turns SIGTERM into a ``KeyboardInterrupt`` for the command's duration
    (what it does to a run: tests/cli/test_tag_faults.py), and hands the caller's handler back."""
    import os
    import signal

    from textorch.cli import main as cli_main

    def callers_handler(signum, frame):  # what a program that calls main() had set
        pass

    previous = signal.signal(signal.SIGTERM, callers_handler)
    try:
        seen = []
        load = SequenceLabeler.load.__func__

        def load_and_look(cls, *args, **kwargs):  # runs inside the command
            seen.append(signal.getsignal(signal.SIGTERM))
            os.kill(os.getpid(), signal.SIGTERM)
            return load(cls, *args, **kwargs)

        monkeypatch.setattr(SequenceLabeler, "load", classmethod(load_and_look))
        text = tmp_path / "in.txt"
        text.write_text("John lives in Paris .\n")
        assert main(["seq", "tag", "--model", str(tmp_path / "model"), "--input", str(text), "--device", "cpu"]) == 130
        assert seen == [cli_main._interrupt]
        assert signal.getsignal(signal.SIGTERM) is callers_handler
        with cli_main.sigterm_as_interrupt(wanted=False):  # serve: uvicorn stops gracefully by itself
            assert signal.getsignal(signal.SIGTERM) is callers_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_serve_keeps_its_own_sigterm_handling() -> None:
    from textorch.cli.main import _build_parser

    args = _build_parser(["serve", "--model", "m"]).parse_args(["serve", "--model", "m"])
    assert args.handles_sigterm is True
