"""One training run, whatever the task: the output held, the checkpoints decided, the data split,
the model fitted (or a finished run recognised), scored, recorded, saved, and the outcome.

Tagging (:mod:`textorch.tagging.training`) and classification
(:mod:`textorch.classification.training`) run the same sequence; each subclasses
:class:`TrainingRun` and supplies only what differs: how its data is split, how its models are
fitted (one model, n folds, an ensemble...), how a model is scored on test data and how it is
exported after saving. The order of the steps, the checks, the log lines, what is written where
and when, and the outcome are this module's, so both tasks keep them alike.

This module sits beside ``onnx`` and ``eval`` and imports neither task: the export after saving is
a hook (:meth:`TrainingRun.export`) that each task fills with :mod:`textorch.onnx.trained_export`.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from textorch.model_dir import check_writable
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.dist import DistContext
from textorch.train.history import record_final_scores
from textorch.train.output_lock import training_output
from textorch.train.resume import COMPLETE, RunCheckpoints, prepare_run

logger = logging.getLogger(__name__)


class TrainedModel(Protocol):
    """What the run asks of a task's model class: both front doors (``SequenceLabeler``,
    ``TextClassifier``) have these, with these meanings."""

    history: Any
    """The :class:`textorch.train.history.TrainingHistory` saved with the model, or None."""

    @classmethod
    def load(cls, directory: str | Path, device: Any = ..., *, cache_dir: str | None = ...) -> Any: ...

    def save(self, directory: str | Path, training_run: dict | None = None) -> Path: ...

    def evaluate(self, corpus: Any, *, ctx: DistContext | None = None) -> dict: ...


class Split(Protocol):
    """What the run asks of a corpus: its size, where it was read from and its format (logged)."""

    path: Any
    format: Any

    def __len__(self) -> int: ...


M = TypeVar("M", bound=TrainedModel)
D = TypeVar("D", bound=Split)


@dataclass
class RunOutcome(Generic[M]):
    """What a training run gives back: the model, its test scores, the split sizes, the folds' summary."""

    model: M | None
    """None only when ``--resume`` found a finished run without ``--output``."""
    test_scores: dict | None = None
    splits: dict = field(default_factory=dict)
    folds: dict | None = None
    """With several folds: per-fold scores (``scores``, and ``scores_on`` what they were computed
    on), their mean and sd, and what else the task records of them; kept in the model's history."""

    def metrics(self) -> dict | None:
        """The ``--metrics-json`` document: the model's test scores, plus the folds' summary."""
        if self.test_scores is None and self.folds is None:
            return None
        document = dict(self.test_scores or {})
        if self.folds is not None:
            document["folds"] = self.folds
        return document


@dataclass
class Fitted(Generic[M]):
    """What a task's fitting gives the run: the model, and the scores it already has."""

    model: M
    test_scores: dict | None = None
    """Set when fitting has scored the saved model on the test data already (n folds do)."""
    folds: dict | None = None
    """The folds' summary (see :attr:`RunOutcome.folds`) when the test data does not give it."""


class TrainingRun(ABC, Generic[M, D]):
    """The run of one training command; a task's subclass fills the hooks.

    Every process of a multi-process run makes one and calls the same methods with the same
    arguments: all read and split the data identically and train together; rank 0 alone writes
    the model and every process waits until it is there.
    """

    model_type: ClassVar[type]
    """The task's model class: its ``load`` reads a finished run's model back."""
    outcome_type: ClassVar[type[RunOutcome]] = RunOutcome
    data_line: ClassVar[str]
    """The log line of the splits, with the path, format and the three sizes to fill."""

    def __init__(self, output: str | None, ctx: DistContext, device: Any, cache_dir: str | None) -> None:
        self.output = output
        self.ctx = ctx
        self.device = device
        self.cache_dir = cache_dir
        self.run: RunCheckpoints | None = None
        """The checkpoints of this run (None: not checkpointed)."""

    # The task's part.

    @abstractmethod
    def split(self, train: D, valid: D | None, test: D | None) -> tuple[D, D | None, D | None]:
        """The data checked and split into what training fits, validates on and is tested on."""

    @abstractmethod
    def fit(self, train: D, valid: D | None, test: D | None) -> Fitted[M]:
        """A new model fitted on the splits (checkpointed through :attr:`run` when it is set)."""

    def score(self, model: M, test: D) -> tuple[dict, dict | None]:
        """``model``'s scores on ``test``, and the folds' summary when they are scored there too."""
        return model.evaluate(test, ctx=self.ctx), None

    @abstractmethod
    def export(self, model: M, output: str, valid: D | None, train: D) -> None:
        """What follows the save on rank 0 (the ONNX export, checked on ``valid`` then ``train``)."""

    # The run's part.

    def from_files(self, checkpoints: CheckpointOptions | None, describe: Callable[[], dict],
                   read: Callable[[], tuple[D, D | None, D | None]]) -> RunOutcome:
        """The training command on files: the output checked before the files are read, then held;
        the checkpoints decided (``describe``: the run's description, see
        :func:`textorch.train.resume.describe_run`); the files read; :meth:`train`."""
        if self.output is not None:
            check_writable(self.output)  # before reading the files: a bad output fails first
        with training_output(self.output, self.ctx):  # one training at a time into one output
            self.run = prepare_run(checkpoints, self.output, describe, self.ctx)
            return self.train(*read())

    def on_corpora(self, train: D, valid: D | None, test: D | None, run: RunCheckpoints | None = None) -> RunOutcome:
        """The run on corpora already read (``run``: their checkpoints, already decided)."""
        if self.output is not None:
            check_writable(self.output)
        with training_output(self.output, self.ctx):
            self.run = run
            return self.train(train, valid, test)

    def train(self, train: D, valid: D | None, test: D | None) -> RunOutcome:
        """Split, then fit (or recognise a finished run), score the test data, record, save."""
        train, valid, test = self.split(train, valid, test)
        splits = {"train": len(train), "valid": len(valid) if valid else 0, "test": len(test) if test else 0}
        logger.info(self.data_line, train.path, train.format, *splits.values())
        if self.run is not None and self.run.status == COMPLETE:
            return self.already_trained(test, splits)
        fitted = self.fit(train, valid, test)
        outcome = self.outcome_type(fitted.model, fitted.test_scores, splits, fitted.folds)
        if test is not None and outcome.test_scores is None:
            outcome.test_scores, on_test = self.score(fitted.model, test)
            outcome.folds = on_test if on_test is not None else outcome.folds
        self._record(fitted.model, outcome, test)
        self._save(fitted.model, valid, train)
        if self.run is not None:
            self.run.finish(self.ctx, outcome.test_scores)
        return outcome

    def already_trained(self, test: D | None, splits: dict) -> RunOutcome:
        """``--resume`` of a run that had finished: its saved model (scored again on the test
        data) or, without ``--output``, the test scores it recorded. Nothing is trained."""
        assert self.run is not None
        model = self.run.finished_model(lambda directory: self.model_type.load(
            directory, device=self.device, cache_dir=self.cache_dir))
        if model is None:
            return self.outcome_type(None, self.run.record.get("test_scores"), splits)
        outcome = self.outcome_type(model, splits=splits)
        if test is not None:
            outcome.test_scores, outcome.folds = self.score(model, test)
        return outcome

    def _record(self, model: M, outcome: RunOutcome, test: D | None) -> None:
        """The test scores and the folds' summary go into the history saved beside the model."""
        if test is not None:
            record_final_scores(model.history, outcome.test_scores, str(test.path))
        if model.history is not None and outcome.folds is not None:
            model.history.folds = outcome.folds

    def _save(self, model: M, valid: D | None, train: D) -> None:
        """Rank 0 writes the model (atomically: the model directory is replaced whole), then its
        export; every process waits until both are there. Checkpoints are moved aside first."""
        if self.output is None:
            return
        if self.run is not None:
            self.run.before_save(self.ctx)
        if self.ctx.is_main:
            model.save(self.output, self.run.model_record() if self.run is not None else None)
            logger.info("model saved to %s", self.output)
        self.export(model, self.output, valid, train)
        self.ctx.barrier()  # nobody may read the model directory before rank 0 has written it
