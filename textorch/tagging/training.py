"""Training a tagger from the commands: the training path with ``SequenceLabeler`` as its class.

``seq train``/``train-eval`` call :func:`train_tagger` (files), ``grobid``/``ner`` and the DeLFT
facade :func:`train_corpora` (corpora); both are :mod:`textorch.tagging.training_path`'s functions
of the same names, which every training run goes through (``SequenceLabeler.train`` too), with
the class that builds and loads the models given here. The path lives apart so that the class
can run it without an import cycle. Then what the commands print and write: :func:`print_outcome`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from textorch.data.corpus import Corpus
from textorch.eval.entity_report import format_report
from textorch.tagging import training_path
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_path import TrainOutcome
from textorch.train.dist import DistContext
from textorch.train.resume import CheckpointOptions, RunCheckpoints


def train_tagger(
    train_path: str,
    output: str | None,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_config: DataConfig,
    valid_path: str | None = None,
    test_path: str | None = None,
    hold_out_test: bool = False,
    device: str | torch.device = "cpu",
    cache_dir: str | None = None,
    ctx: DistContext | None = None,
    skip_bad_sequences: bool = False,
    checkpoints: CheckpointOptions | None = None,
    fold_count: int = 1,
    input_model: str | None = None,
    fold_parallel: str = "auto",
) -> TrainOutcome:
    """``seq train`` and ``seq train-eval``: :func:`textorch.tagging.training_path.train_tagger`
    (read and check the files, then :func:`train_corpora`) for a :class:`SequenceLabeler`."""
    return training_path.train_tagger(
        SequenceLabeler, train_path, output, model_config, train_config, data_config, valid_path=valid_path,
        test_path=test_path, hold_out_test=hold_out_test, device=device, cache_dir=cache_dir, ctx=ctx,
        skip_bad_sequences=skip_bad_sequences, checkpoints=checkpoints, fold_count=fold_count, input_model=input_model,
        fold_parallel=fold_parallel)


def train_corpora(
    train: Corpus,
    output: str | None,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_config: DataConfig,
    valid: Corpus | None = None,
    test: Corpus | None = None,
    hold_out_test: bool = False,
    fold_count: int = 1,
    input_model: str | None = None,
    device: torch.device | str = "cpu",
    cache_dir: str | None = None,
    ctx: DistContext | None = None,
    fold_parallel: str = "auto",
    run: RunCheckpoints | None = None,
) -> TrainOutcome:
    """Split, train (plainly, by n folds, or continuing ``input_model``), score the test data, save
    a :class:`SequenceLabeler`: :func:`textorch.tagging.training_path.train_corpora`, where the
    splits and the options are described."""
    return training_path.train_corpora(
        SequenceLabeler, train, output, model_config, train_config, data_config, valid=valid, test=test,
        hold_out_test=hold_out_test, fold_count=fold_count, input_model=input_model, device=device,
        cache_dir=cache_dir, ctx=ctx, fold_parallel=fold_parallel, run=run)


def write_metrics(scores: dict, path: str | None) -> None:
    """``--metrics-json``: the scores as JSON at ``path`` (nothing without one)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(scores, indent=2) + "\n", encoding="utf-8")


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
