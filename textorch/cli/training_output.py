"""What the tagging commands print and write once a run is over: the n-fold summary, the test
report of the saved model and ``--metrics-json``. The training path returns its outcome and
prints nothing; the commands (``seq``, ``grobid``, ``ner``) say it here, the same way."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from textorch.eval.entity_report import format_report
from textorch.runtime.write_errors import write_report

if TYPE_CHECKING:  # the commands that only tag never import the training path (nor torch)
    from textorch.tagging.training import TrainOutcome


def write_metrics(scores: dict, path: str | None) -> None:
    """``--metrics-json``: the scores as JSON at ``path`` (nothing without one)."""
    if path:
        write_report(path, json.dumps(scores, indent=2) + "\n", "--metrics-json")


def print_outcome(outcome: TrainOutcome, metrics_json: str | None = None) -> None:
    """The n-fold summary, then the test report of the saved model, then ``--metrics-json``."""
    from textorch.eval.training_report import format_fold_summary  # it loads torch: only after a training

    if outcome.folds:
        print(format_fold_summary(outcome.folds))
        print()
    if outcome.test_scores is not None:
        if outcome.folds:
            print("saved model (fold with the best validation F1):")
        print(format_report(outcome.test_scores))
    metrics = outcome.metrics()
    if metrics is not None:
        write_metrics(metrics, metrics_json)
