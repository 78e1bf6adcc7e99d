"""Sequence-labelling training runs beyond a plain ``seq train``: n-fold, incremental, in-memory data.

``workflows.train_tagger`` serves the plain file-to-model case. The functions here add the
``--fold-count`` and ``--incremental`` modes and accept corpora already in memory, which the
GROBID and NER applications need (DeLFT's NER ``train`` concatenates three files). The splits
are the ones ``train_tagger`` takes (same fractions, same seeds), so ``grobid date train-eval``
and ``seq train-eval`` on the same file train and test on the same sequences.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import torch

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.data.splits import holdout
from textorch.data.checked_read import read_validated
from textorch.errors import ConfigError, DataError, ModelFormatError
from textorch.tagging.labeler import SequenceLabeler
from textorch.model_dir import check_writable
from textorch.train.dist import DistContext
from textorch.train.fold_spread import spread_folds
from textorch.train.history import read_history, record_final_scores
from textorch.tagging.runs import TrainOutcome, _open_embeddings, report, write_metrics

logger = logging.getLogger(__name__)


@dataclass
class RunOutcome(TrainOutcome):
    folds: dict | None = None
    """n-fold training: per-fold scores, mean and sd per label, the index of the kept fold."""

    def metrics(self) -> dict | None:
        """The ``--metrics-json`` document: the saved model's test scores, plus the n-fold summary."""
        if self.test_scores is None and self.folds is None:
            return None
        document = dict(self.test_scores or {})
        if self.folds is not None:
            document["folds"] = self.folds
        return document


def split_for_training(
    train: Corpus, valid: Corpus | None, test: Corpus | None, hold_out_test: bool, train_config: TrainConfig,
    fold_count: int = 1,
) -> tuple[Corpus, Corpus | None, Corpus | None]:
    """Test and validation shares as ``train_tagger`` takes them; n-fold needs no validation share
    (each fold validates on its own part), and a validation file then joins the training data,
    as DeLFT's n-fold training does."""
    sequences = train.sequences
    if hold_out_test and test is None:
        sequences, held = holdout(sequences, 0.1, train_config.seed)
        test = replace(train, sequences=held, path=f"{train.path} (10% held out)")
    if fold_count > 1:
        if valid is not None:
            sequences, valid = sequences + valid.sequences, None
    elif train_config.early_stop and valid is None:
        sequences, held = holdout(sequences, train_config.valid_fraction, train_config.seed + 1)
        valid = replace(train, sequences=held, path=f"{train.path} ({train_config.valid_fraction:.0%} held out)")
    train = replace(train, sequences=sequences)
    if not train.sequences:
        raise ConfigError(f"{train.path}: no training sequences left after splitting")
    return train, valid, test


def _continue_from(input_model: str, train: Corpus, device: torch.device | str, cache_dir: str | None,
                   seed: int) -> tuple[SequenceLabeler, list]:
    """The saved model, vocabularies and layers grown for ``train``, and its earlier history runs."""
    from textorch.tagging.incremental import prepare_incremental

    labeler = SequenceLabeler.load(input_model, device=device, cache_dir=cache_dir)
    if train.format != labeler.input_format:
        raise ConfigError(f"{train.path}: {train.format} data, but {input_model} was trained on {labeler.input_format} data")
    if train.n_features != labeler.n_features:
        raise DataError(train.path, None, f"{train.n_features} feature columns, but {input_model} was trained "
                                          f"with {labeler.n_features}: the same GROBID model's features are needed")
    try:
        previous = read_history(input_model).runs
    except ModelFormatError:
        previous = []  # a model saved without history: the new run stands alone
    prepare_incremental(labeler, train.sequences, seed)
    return labeler, previous


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
) -> RunOutcome:
    """Split, train (plainly, by n folds, or continuing ``input_model``), score the test data, save.

    With ``input_model`` the network options of ``model_config``/``data_config`` are not used:
    the architecture, sizes, embeddings and feature columns are the saved model's.
    ``fold_parallel`` (``auto``, ``true``, ``false``): whether several processes train whole folds
    side by side rather than each fold together, see :mod:`textorch.train.fold_spread`.
    """
    ctx = ctx or DistContext()
    if fold_count < 1:
        raise ConfigError(f"--fold-count must be >= 1, got {fold_count}")
    spread = spread_folds(fold_parallel, fold_count, ctx.world_size)
    if input_model and fold_count > 1:
        raise ConfigError("--incremental and --fold-count > 1 cannot be combined")
    if output is not None:
        check_writable(output)
    train, valid, test = split_for_training(train, valid, test, hold_out_test, train_config, fold_count)
    splits = {"train": len(train), "valid": len(valid) if valid else 0, "test": len(test) if test else 0}
    logger.info("data: %s (%s) — %d train, %d valid, %d test sequences", train.path, train.format, *splits.values())
    folds = None
    if input_model:
        labeler, previous = _continue_from(input_model, train, device, cache_dir, train_config.seed)
        labeler.fit(train, valid if train_config.early_stop else None, train_config, ctx=ctx)
        if labeler.history is not None:
            run = labeler.history.runs[-1]
            run.name, run.continues = "incremental", True
            labeler.history.runs = [*previous, run]
    else:
        with ctx.local_main_first():  # one process per machine builds the embeddings cache
            embeddings = _open_embeddings(data_config.embeddings, cache_dir)
        if fold_count > 1:
            from textorch.tagging.folds import train_folds

            folds = train_folds(train, test, model_config, train_config, data_config, fold_count, embeddings, device, ctx, spread)
            labeler = folds.labeler
        else:
            labeler = SequenceLabeler.build(train, model_config, data_config, embeddings, device, seed=train_config.seed)
            labeler.fit(train, valid if train_config.early_stop else None, train_config, ctx=ctx)
    outcome = RunOutcome(labeler, splits=splits, folds=folds.summary() if folds else None)
    if test is not None:
        outcome.test_scores = folds.test_scores[folds.kept] if folds else labeler.evaluate(test, ctx=ctx)
        record_final_scores(labeler.history, outcome.test_scores, str(test.path))
    if output is not None:
        if ctx.is_main:
            labeler.save(output)
            logger.info("model saved to %s", output)
        ctx.barrier()  # nobody may read the model directory before rank 0 has written it
    return outcome


def train_files(
    train_path: str,
    output: str | None,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_config: DataConfig,
    valid_path: str | None = None,
    test_path: str | None = None,
    skip_bad_sequences: bool = False,
    **run: object,
) -> RunOutcome:
    """:func:`train_corpora` on files, read and validated as ``train_tagger`` reads them."""
    if output is not None:
        check_writable(output)
    train, valid, test = read_validated(train_path, valid_path, test_path, data_config.format,
                                        train_config.max_sequence_length, skip_bad_sequences)
    return train_corpora(train, output, model_config, train_config, data_config, valid, test, **run)  # type: ignore[arg-type]


def print_outcome(outcome: TrainOutcome, metrics_json: str | None = None) -> None:
    """What the training commands print: the n-fold summary, then the test report of the saved model."""
    from textorch.eval.training_report import format_fold_summary

    folds = getattr(outcome, "folds", None)
    if folds:
        print(format_fold_summary(folds))
        print()
    if outcome.test_scores is not None:
        if folds:
            print("saved model (fold with the best validation F1):")
        print(report(outcome.test_scores))
    metrics = outcome.metrics() if isinstance(outcome, RunOutcome) else outcome.test_scores
    if metrics is not None:
        write_metrics(metrics, metrics_json)
