"""Training a tagger: read and check the data, split it, train, score the test data, save.

:func:`train_corpora` is the one training path. ``seq train``/``train-eval`` (through
:func:`train_tagger`, which reads files), ``grobid``/``ner`` (corpora the presets read),
``SequenceLabeler.train`` (files or corpora), n-fold training and ``--incremental`` all end
there, so the splits (:func:`textorch.data.splits.training_splits`: same fractions, same seeds),
the logging and the saving are the same whatever the door: ``grobid date train-eval`` and
``seq train-eval`` on the same file train and test on the same sequences.

The path builds and loads models of the class it is given (``labeler_type``, the first argument
of each function that makes one) rather than importing ``SequenceLabeler``: the class's own
``train`` runs this module, so the module cannot import the class without an import cycle.
:mod:`textorch.tagging.training` gives the commands the same functions with the class bound.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from textorch.tagging.config import TASK, DataConfig, ModelConfig, TrainConfig, named_feature_columns, to_dict
from textorch.data.corpus import Corpus
from textorch.data.checked_read import read_validated
from textorch.data.features import require_feature_columns_of
from textorch.data.splits import piece_lengths, training_splits
from textorch.errors import ConfigError, DataError, ModelFormatError
from textorch.model_dir import check_writable
from textorch.onnx.trained_export import export_after_training
from textorch.tagging.inputs import as_corpus
from textorch.tagging.learned_check import learned_nothing, nothing_to_learn
from textorch.train.dist import DistContext
from textorch.train.fold_spread import spread_folds
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.output_lock import training_output
from textorch.train.resume import COMPLETE, RunCheckpoints, describe_run, prepare_run
from textorch.train.history import read_history, record_final_scores

if TYPE_CHECKING:  # annotations only: the labeler runs this module
    from textorch.tagging.folds import FoldsResult
    from textorch.tagging.labeler import SequenceLabeler

LabelerType = type["SequenceLabeler"]
"""The class whose ``build`` and ``load`` make the models: ``SequenceLabeler`` (or a subclass)."""

logger = logging.getLogger(__name__)


@dataclass
class TrainOutcome:
    """What a training run gives back: the model, its test scores, the split sizes, the n-fold summary."""

    labeler: SequenceLabeler | None
    """None only when ``--resume`` found a finished run without ``--output``."""
    test_scores: dict | None = None
    splits: dict = field(default_factory=dict)
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
    """Test and validation shares by :func:`~textorch.data.splits.training_splits`; n-fold needs no
    validation share (each fold validates on its own part), and a validation file then joins the
    training data, as DeLFT's n-fold training does. Validation data smaller than
    ``train_config.min_validation_sequences`` joins the training data too (no early stopping)."""
    wants_valid = fold_count == 1 and train_config.early_stop
    train, valid, test = training_splits(train, valid, test, hold_out_test=hold_out_test, seed=train_config.seed,
                                         valid_fraction=train_config.valid_fraction if wants_valid else None)
    if wants_valid and valid is None:
        logger.info("%s: %d training sequence(s), too few to hold out validation data: no early stopping, the last "
                    "epoch is kept", train.path, len(train))
    too_small = valid is not None and len(valid) < train_config.min_validation_sequences
    if too_small:  # a --valid file too: whoever gave it, a handful of sequences cannot pick an epoch
        logger.info("validation data of %d sequences is too few to pick an epoch (fewer than %d): training on "
                    "all %d sequences", len(valid), train_config.min_validation_sequences, len(train) + len(valid))
    if (fold_count > 1 or too_small) and valid is not None:
        train, valid = replace(train, sequences=train.sequences + valid.sequences), None
    if not train.sequences:
        raise ConfigError(f"{train.path}: no training sequences left after splitting")
    return train, valid, test


def fitted_to_data(train_config: TrainConfig, train_lengths: Sequence[int], has_valid: bool) -> TrainConfig:
    """``train_config`` for training sequences of ``train_lengths`` tokens: no early stopping
    without validation data (``has_valid`` False: a share too small to be held out; n folds
    validate on their own), a batch size that gives at least ``min_steps_per_epoch`` steps and
    holds about ``max_batch_tokens`` tokens at most, and, without validation, the epochs that make
    about ``steps_without_validation`` steps (and see at most about ``tokens_without_validation``
    tokens) at a linearly falling rate. Sequences count as the pieces of ``max_sequence_length``
    tokens that training cuts them into, so a corpus of whole documents is sized by what a step
    reads, not by how many documents it has."""
    changes: dict[str, object] = {}
    if not has_valid and train_config.early_stop:
        changes["early_stop"] = False
    pieces = piece_lengths(train_lengths, train_config.max_sequence_length)
    n_train, n_tokens = len(pieces), sum(pieces)
    batch = train_config.batch_size
    if train_config.min_steps_per_epoch:
        batch = max(1, min(batch, n_train // train_config.min_steps_per_epoch))
    if train_config.max_batch_tokens and n_tokens:
        batch = max(1, min(batch, round(train_config.max_batch_tokens * n_train / n_tokens)))
    if batch != train_config.batch_size:
        logger.info("batch size %d for %d training sequences of %d tokens on average (at least %d steps an epoch, "
                    "about %s tokens a batch at most)", batch, n_train, round(n_tokens / max(n_train, 1)),
                    train_config.min_steps_per_epoch, _count_or_any(train_config.max_batch_tokens))
        changes["batch_size"] = batch
    if not has_valid and train_config.steps_without_validation:
        steps_per_epoch = max(1, -(-n_train // batch))
        epochs = max(1, min(train_config.max_epoch, round(train_config.steps_without_validation / steps_per_epoch)))
        if train_config.tokens_without_validation and n_tokens:
            epochs = max(1, min(epochs, round(train_config.tokens_without_validation / n_tokens)))
        logger.info("%d epochs of %d steps for %d training sequences without validation (about %d steps, at most "
                    "about %s tokens), the learning rate falling linearly to zero", epochs, steps_per_epoch, n_train,
                    train_config.steps_without_validation, _count_or_any(train_config.tokens_without_validation))
        changes.update(max_epoch=epochs, lr_schedule="linear")
    return replace(train_config, **changes) if changes else train_config


def _count_or_any(n: int) -> str:
    return f"{n:,}" if n else "any"


def train_tagger(
    labeler_type: LabelerType,
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
    """``seq train`` and ``seq train-eval``: :func:`train_corpora` on files.

    The data is validated first (:mod:`textorch.data.checked_read`): errors stop the run before
    any training, all listed, unless ``skip_bad_sequences`` leaves out the sequences concerned.

    With ``checkpoints`` (and a place for them: ``output`` or ``checkpoints.directory``) the
    training state is saved as it goes, and ``checkpoints.resume`` continues an interrupted
    run, or reports a finished one (:mod:`textorch.train.resume`); not with n folds or
    ``input_model`` yet.

    In a multi-process run (``ctx`` from :func:`textorch.train.dist.session`) every process
    calls this with the same arguments: all read the data and split it identically, train
    their shards, score the test set together; only rank 0 writes the model.
    """
    if output is not None:
        check_writable(output)  # before reading the files: a bad output fails first
    if checkpoints is not None and (fold_count != 1 or input_model):
        raise ConfigError("checkpoints are not available with --fold-count/--incremental yet")
    ctx = ctx or DistContext()
    with training_output(output, ctx):  # one training at a time into one output
        run = prepare_run(checkpoints, output, lambda: describe_run(
            TASK, {"model": to_dict(model_config), "train": to_dict(train_config), "data": to_dict(data_config)},
            {"train": train_path, "valid": valid_path, "test": test_path},
            {"hold_out_test": hold_out_test, "skip_bad_sequences": skip_bad_sequences}, ctx.world_size), ctx)
        train, valid, test = read_validated(train_path, valid_path, test_path, data_config.format,
                                            train_config.max_sequence_length, skip_bad_sequences)
        train, valid, test = require_feature_columns_of((train, valid, test),
                                                        named_feature_columns(model_config, data_config), skip_bad_sequences)
        spread = _mode_options(fold_count, input_model, fold_parallel, ctx)
        return _train_checked(labeler_type, train, output, model_config, train_config, data_config, valid, test,
                              hold_out_test, fold_count, input_model, device, cache_dir, ctx, spread, run)


def train_corpora(
    labeler_type: LabelerType,
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
    """Split, train (plainly, by n folds, or continuing ``input_model``), score the test data, save.

    Splits (all seeded by ``train_config.seed``): with ``hold_out_test`` and no test data, 10 %
    of the training data becomes the test set; early stopping uses ``valid`` when given, else a
    further ``valid_fraction`` of what remains; without early stopping no validation data is taken.

    With ``input_model`` the network options of ``model_config``/``data_config`` are not used:
    the architecture, sizes, embeddings and feature columns are the saved model's.
    ``fold_parallel`` (``auto``, ``true``, ``false``): whether several processes train whole folds
    side by side rather than each fold together, see :mod:`textorch.train.fold_spread`.
    ``run``: the checkpoints of this run, as :func:`train_tagger` prepares them.
    """
    ctx = ctx or DistContext()
    spread = _mode_options(fold_count, input_model, fold_parallel, ctx)
    if output is not None:
        check_writable(output)
    with training_output(output, ctx):
        return _train_checked(labeler_type, train, output, model_config, train_config, data_config, valid, test,
                              hold_out_test, fold_count, input_model, device, cache_dir, ctx, spread, run)


def train_given(
    labeler_type: LabelerType, train: str | Path | Corpus, valid: str | Path | Corpus | None,
    configs: tuple[ModelConfig, TrainConfig, DataConfig], output: str | Path | None, device: torch.device | str,
    cache_dir: str | None,
) -> TrainOutcome:
    """``SequenceLabeler.train``'s run: :func:`train_tagger` when the data are files (read and
    checked as ``seq train`` does), else :func:`train_corpora` on the corpora given."""
    out = None if output is None else str(output)
    if isinstance(train, (str, Path)) and (valid is None or isinstance(valid, (str, Path))):
        return train_tagger(labeler_type, str(train), out, *configs, valid_path=None if valid is None else str(valid),
                            device=device, cache_dir=cache_dir)
    # train_corpora checks the output before any training
    train_corpus = as_corpus(train, configs[2].format)
    valid_corpus = as_corpus(valid, train_corpus.format) if valid is not None else None
    return train_corpora(labeler_type, train_corpus, out, *configs, valid=valid_corpus, device=device, cache_dir=cache_dir)


def _mode_options(fold_count: int, input_model: str | None, fold_parallel: str, ctx: DistContext) -> bool:
    """The training mode's options checked; whether folds are spread over the processes."""
    if fold_count < 1:
        raise ConfigError(f"--fold-count must be >= 1, got {fold_count}")
    spread = spread_folds(fold_parallel, fold_count, ctx.world_size)
    if input_model and fold_count > 1:
        raise ConfigError("--incremental and --fold-count > 1 cannot be combined")
    return spread


def _train_checked(
    labeler_type: LabelerType, train: Corpus, output: str | None, model_config: ModelConfig, train_config: TrainConfig, data_config: DataConfig,
    valid: Corpus | None, test: Corpus | None, hold_out_test: bool, fold_count: int, input_model: str | None,
    device: torch.device | str, cache_dir: str | None, ctx: DistContext, spread: bool, run: RunCheckpoints | None,
) -> TrainOutcome:
    """:func:`train_corpora` once its options and ``output`` were checked (by either door, once):
    split, then one of four modes (a finished run resumed, continued training, n folds, one
    model), then score the test data and save."""
    if ctx.is_main and (problem := nothing_to_learn(train)):
        logger.warning("%s", problem)
    train, valid, test = split_for_training(train, valid, test, hold_out_test, train_config, fold_count)
    train_config = fitted_to_data(train_config, [len(s) for s in train.sequences], valid is not None or fold_count > 1)
    splits = {"train": len(train), "valid": len(valid) if valid else 0, "test": len(test) if test else 0}
    logger.info("data: %s (%s) — %d train, %d valid, %d test sequences", train.path, train.format, *splits.values())
    if run is not None and run.status == COMPLETE:
        return _already_trained(labeler_type, run, test, splits, device, cache_dir, ctx)
    early_stop_on = valid if train_config.early_stop else None
    folds = None
    if input_model:
        labeler = _train_incremental(labeler_type, input_model, train, early_stop_on, train_config, device, cache_dir, ctx)
    elif fold_count > 1:
        folds = _train_folds(labeler_type, train, test, model_config, train_config, data_config, fold_count, device, cache_dir,
                             ctx, spread)
        labeler = folds.labeler
    else:
        labeler = _train_one(labeler_type, train, early_stop_on, model_config, train_config, data_config, device, cache_dir, ctx, run)
    outcome = TrainOutcome(labeler, splits=splits, folds=folds.summary() if folds else None)
    if test is not None:
        outcome.test_scores = folds.test_scores[folds.kept] if folds else labeler.evaluate(test, ctx=ctx)
        record_final_scores(labeler.history, outcome.test_scores, str(test.path))
    _save(labeler, output, run, ctx, (valid, train, train_config.seed))
    if run is not None:
        run.finish(ctx, outcome.test_scores)
    return outcome


def _train_one(labeler_type: LabelerType, train: Corpus, valid: Corpus | None, model_config: ModelConfig, train_config: TrainConfig,
               data_config: DataConfig, device: torch.device | str, cache_dir: str | None, ctx: DistContext,
               run: RunCheckpoints | None) -> SequenceLabeler:
    """One new model, checkpointed when ``run`` says so."""
    embeddings = _embeddings(data_config, cache_dir, ctx)
    labeler = labeler_type.build(train, model_config, data_config, embeddings, device, seed=train_config.seed)
    labeler.fit(train, valid, train_config, ctx=ctx, checkpoints=run.checkpointer() if run is not None else None)
    _log_training(labeler)
    _warn_if_nothing_learned(labeler, train)
    return labeler


def _train_folds(labeler_type: LabelerType, train: Corpus, test: Corpus | None, model_config: ModelConfig, train_config: TrainConfig,
                 data_config: DataConfig, fold_count: int, device: torch.device | str, cache_dir: str | None,
                 ctx: DistContext, spread: bool) -> "FoldsResult":
    """``fold_count`` models, each validated on its own fold (:mod:`textorch.tagging.folds`)."""
    from textorch.tagging.folds import train_folds

    embeddings = _embeddings(data_config, cache_dir, ctx)
    return train_folds(labeler_type, train, test, model_config, train_config, data_config, fold_count, embeddings, device, ctx, spread)


def _train_incremental(labeler_type: LabelerType, input_model: str, train: Corpus, valid: Corpus | None, train_config: TrainConfig,
                       device: torch.device | str, cache_dir: str | None, ctx: DistContext) -> SequenceLabeler:
    """The saved model trained further on ``train``; its history goes on with one more run."""
    labeler, previous = _continue_from(labeler_type, input_model, train, device, cache_dir, train_config.seed)
    labeler.fit(train, valid, train_config, ctx=ctx)
    _warn_if_nothing_learned(labeler, train)
    if labeler.history is not None:
        last = labeler.history.runs[-1]
        last.name, last.continues = "incremental", True
        labeler.history.runs = [*previous, last]
    return labeler


def _warn_if_nothing_learned(labeler: SequenceLabeler, train: Corpus) -> None:
    if problem := learned_nothing(labeler, train):
        logger.warning("%s", problem)


def _embeddings(data_config: DataConfig, cache_dir: str | None, ctx: DistContext):
    """The word vectors of a new model; one process per machine builds their cache."""
    from textorch.embeddings.for_models import open_for_training

    with ctx.local_main_first():
        return open_for_training(data_config.embeddings, cache_dir)


def _save(labeler: SequenceLabeler, output: str | None, run: RunCheckpoints | None, ctx: DistContext,
          check_data: tuple[Corpus | None, Corpus, int]) -> None:
    """Rank 0 writes the model, then its ONNX export (checked on ``check_data``: validation
    corpus, training corpus, seed); every process waits until both are there."""
    if output is None:
        return
    if run is not None:
        run.before_save(ctx)
    if ctx.is_main:
        labeler.save(output, run.model_record() if run is not None else None)
        logger.info("model saved to %s", output)
    export_after_training(labeler, output, ctx, *check_data)
    ctx.barrier()  # nobody may read the model directory before rank 0 has written it


def _log_training(labeler: SequenceLabeler) -> None:
    result = labeler.training_result
    if labeler.word_table is not None:
        logger.info("word vectors found for %.1f%% of distinct words", 100 * labeler.word_table.coverage())
    logger.info(
        "trained %d epochs in %.1fs (%.0f tokens/s), best epoch %d",
        len(result.history), result.train_seconds, result.tokens_per_s, result.best_epoch,
    )


def _already_trained(labeler_type: LabelerType, run: RunCheckpoints, test: Corpus | None, splits: dict, device: str | torch.device,
                     cache_dir: str | None, ctx: DistContext) -> TrainOutcome:
    """``--resume`` of a run that had finished: its model (scored again on the test data when it
    was saved) or, without ``--output``, the test scores it recorded."""
    labeler = run.finished_model(lambda directory: labeler_type.load(directory, device=device, cache_dir=cache_dir))
    if labeler is None:
        return TrainOutcome(None, run.record.get("test_scores"), splits)
    scores = labeler.evaluate(test, ctx=ctx) if test is not None else None
    return TrainOutcome(labeler, scores, splits)


def _continue_from(labeler_type: LabelerType, input_model: str, train: Corpus, device: torch.device | str, cache_dir: str | None,
                   seed: int) -> tuple[SequenceLabeler, list]:
    """The saved model, vocabularies and layers grown for ``train``, and its earlier history runs."""
    from textorch.tagging.incremental import prepare_incremental

    labeler = labeler_type.load(input_model, device=device, cache_dir=cache_dir)
    if train.format != labeler.input_format:
        raise ConfigError(f"{train.path}: {train.format} data, but {input_model} was trained on {labeler.input_format} data")
    if labeler.encoder.feature_columns and train.n_features != labeler.n_features:  # a model without features reads none
        raise DataError(train.path, None, f"{train.n_features} feature columns, but {input_model} was trained "
                                          f"with {labeler.n_features}: the same GROBID model's features are needed")
    try:
        previous = read_history(input_model).runs
    except ModelFormatError:
        previous = []  # a model saved without history: the new run stands alone
    prepare_incremental(labeler, train.sequences, seed)
    return labeler, previous
