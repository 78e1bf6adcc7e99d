"""Training a tagger from the commands: the training path with ``SequenceLabeler`` as its class.

``seq train``/``train-eval`` call :func:`train_tagger` (files), ``grobid``/``ner`` and the DeLFT
facade :func:`train_corpora` (corpora); both are :mod:`textorch.tagging.training_path`'s functions
of the same names, which every training run goes through (``SequenceLabeler.train`` too), with
the class that builds and loads the models given here. The path lives apart so that the class
can run it without an import cycle. Then what the commands print and write: :func:`print_outcome`.
"""

from __future__ import annotations

import json
from functools import partial

from textorch.eval.entity_report import format_report
from textorch.tagging import training_path
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_path import TrainOutcome
from textorch.runtime.write_errors import write_report


# The class bound once: the arguments, their defaults and their documentation are
# training_path's, so they are not restated here.
train_tagger = partial(training_path.train_tagger, SequenceLabeler)
"""``seq train`` and ``seq train-eval``: :func:`textorch.tagging.training_path.train_tagger` for a
:class:`SequenceLabeler` (read and check the files, then :func:`train_corpora`)."""
train_corpora = partial(training_path.train_corpora, SequenceLabeler)
"""``grobid``, ``ner`` and the DeLFT facade: :func:`textorch.tagging.training_path.train_corpora`
for a :class:`SequenceLabeler` (split, train, score, save)."""


def write_metrics(scores: dict, path: str | None) -> None:
    """``--metrics-json``: the scores as JSON at ``path`` (nothing without one)."""
    if path:
        write_report(path, json.dumps(scores, indent=2) + "\n", "--metrics-json")


def print_outcome(outcome: TrainOutcome, metrics_json: str | None = None) -> None:
    """What the training commands print: the n-fold summary, then the test report of the saved model."""
    from textorch.eval.training_report import format_fold_summary

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
