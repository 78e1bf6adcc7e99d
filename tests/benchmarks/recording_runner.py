"""A stand-in for the suite's ``Runner`` that starts nothing, shared by the training and tagging tests."""

from __future__ import annotations

from pathlib import Path


class RecordingRunner:
    """Stands for suite_runner.Runner: records each runner process asked for (system,
    options) and answers with ``answer(system, options)`` as (payload, wall seconds)."""

    def __init__(self, work: Path, answer) -> None:
        self.work = work
        self.answer = answer
        self.calls: list[tuple[str, list[str]]] = []

    def runner(self, system, name, args):
        self.calls.append((system, args))
        return self.answer(system, args)
