"""Training a tagger: read and check the data, split it, train, score the test data, save.

:func:`train_corpora` is the one training path. ``seq train``/``train-eval`` (through
:func:`train_tagger`, which reads files), ``grobid``/``ner`` (corpora the presets read), the DeLFT
facade, :func:`train_sequence_labeler` (the Python API: files or corpora), n-fold training and
``--incremental`` all end there, so the splits (:func:`textorch.data.splits.training_splits`:
same fractions, same seeds), the logging and the saving are the same whatever the door:
``grobid date train-eval`` and ``seq train-eval`` on the same file train and test on the same
sequences.

Training sits above the model: this module builds and loads :class:`SequenceLabeler` objects
and gives them back; the class itself knows nothing of it (it fits one network, ``fit``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from textorch.tagging.config import TASK, DataConfig, ModelConfig, TrainConfig, named_feature_columns, to_dict
from textorch.tagging.folds import FoldsResult, train_folds
from textorch.tagging.incremental import prepare_incremental
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_data import fitted_to_data, split_for_training
from textorch.data.corpus import Corpus
from textorch.data.checked_read import read_validated
from textorch.data.features import require_feature_columns_of
from textorch.errors import ConfigError, DataError, ModelFormatError
from textorch.model_dir import check_writable
from textorch.onnx.trained_export import export_after_training
from textorch.tagging.inputs import as_corpus
from textorch.tagging.learned_check import learned_nothing, nothing_to_learn
from textorch.train.config import sort_options
from textorch.train.dist import DistContext, resolve_device
from textorch.train.fold_spread import spread_folds
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.output_lock import training_output
from textorch.train.resume import COMPLETE, RunCheckpoints, describe_run, prepare_run
from textorch.train.history import read_history, record_final_scores

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
        return _train_checked(train, output, model_config, train_config, data_config, valid, test,
                              hold_out_test, fold_count, input_model, device, cache_dir, ctx, spread, run)


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
        return _train_checked(train, output, model_config, train_config, data_config, valid, test,
                              hold_out_test, fold_count, input_model, device, cache_dir, ctx, spread, run)


def train_sequence_labeler(
    train: str | Path | Corpus,
    valid: str | Path | Corpus | None = None,
    architecture: str = ModelConfig.architecture,
    embeddings: str = DataConfig.embeddings,
    output: str | Path | None = None,
    *,
    device: str = "cpu",
    cache_dir: str | None = None,
    **options: Any,
) -> SequenceLabeler:
    """Train a tagger, as ``textorch seq train`` does; save it when ``output`` is given.

    Args:
        train: labelled CoNLL or GROBID file (read and checked as ``seq train`` does, through
            :func:`train_tagger`), or a :class:`Corpus` already read (:func:`train_corpora`).
        valid: validation data for early stopping; None holds out ``valid_fraction`` of
            ``train`` (seeded), as the CLI does.
        architecture: a name from ``textorch seq architectures``.
        embeddings: registry name or path of word vectors, or ``"none"``.
        output: model directory to write (must not hold another model).
        device: ``cpu``, ``cuda`` or ``auto``.
        cache_dir: textorch's cache root (default: $TEXTORCH_CACHE_DIR, else ~/.cache/textorch).
        **options: any field of ``ModelConfig``, ``TrainConfig`` or ``DataConfig``
            (``max_epoch=10``, ``batch_size=16``, ``word_hidden=50``, ``seed=1``...).

    Returns:
        The trained labeler, its ``training_result`` holding the per-epoch history.

    Raises:
        ConfigError: an unknown option or an invalid value.
        DataError: a problem in a data file, located at ``path:line``.
    """
    configs = sort_options({**options, "architecture": architecture, "embeddings": embeddings},
                           (ModelConfig, TrainConfig, DataConfig))
    where = resolve_device(device, DistContext())
    out = None if output is None else str(output)
    if isinstance(train, (str, Path)) and (valid is None or isinstance(valid, (str, Path))):
        outcome = train_tagger(str(train), out, *configs, valid_path=None if valid is None else str(valid),
                               device=where, cache_dir=cache_dir)
    else:  # train_corpora checks the output before any training
        train_corpus = as_corpus(train, configs[2].format)
        valid_corpus = as_corpus(valid, train_corpus.format) if valid is not None else None
        outcome = train_corpora(train_corpus, out, *configs, valid=valid_corpus, device=where, cache_dir=cache_dir)
    return outcome.labeler  # type: ignore[return-value]  # a new run always has its model


def _mode_options(fold_count: int, input_model: str | None, fold_parallel: str, ctx: DistContext) -> bool:
    """The training mode's options checked; whether folds are spread over the processes."""
    if fold_count < 1:
        raise ConfigError(f"--fold-count must be >= 1, got {fold_count}")
    spread = spread_folds(fold_parallel, fold_count, ctx.world_size)
    if input_model and fold_count > 1:
        raise ConfigError("--incremental and --fold-count > 1 cannot be combined")
    return spread


def _train_checked( train: Corpus, output: str | None, model_config: ModelConfig, train_config: TrainConfig, data_config: DataConfig,
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
        return _already_trained(run, test, splits, device, cache_dir, ctx)
    early_stop_on = valid if train_config.early_stop else None
    folds = None
    if input_model:
        labeler = _train_incremental(input_model, train, early_stop_on, train_config, device, cache_dir, ctx)
    elif fold_count > 1:
        folds = _train_folds(train, test, model_config, train_config, data_config, fold_count, device, cache_dir,
                             ctx, spread)
        labeler = folds.labeler
    else:
        labeler = _train_one(train, early_stop_on, model_config, train_config, data_config, device, cache_dir, ctx, run)
    outcome = TrainOutcome(labeler, splits=splits, folds=folds.summary() if folds else None)
    if test is not None:
        outcome.test_scores = folds.test_scores[folds.kept] if folds else labeler.evaluate(test, ctx=ctx)
        record_final_scores(labeler.history, outcome.test_scores, str(test.path))
    _save(labeler, output, run, ctx, (valid, train, train_config.seed))
    if run is not None:
        run.finish(ctx, outcome.test_scores)
    return outcome


def _train_one(train: Corpus, valid: Corpus | None, model_config: ModelConfig, train_config: TrainConfig,
               data_config: DataConfig, device: torch.device | str, cache_dir: str | None, ctx: DistContext,
               run: RunCheckpoints | None) -> SequenceLabeler:
    """One new model, checkpointed when ``run`` says so."""
    embeddings = _embeddings(data_config, cache_dir, ctx)
    labeler = SequenceLabeler.build(train, model_config, data_config, embeddings, device, seed=train_config.seed)
    labeler.fit(train, valid, train_config, ctx=ctx, checkpoints=run.checkpointer() if run is not None else None)
    _log_training(labeler)
    _warn_if_nothing_learned(labeler, train)
    return labeler


def _train_folds(train: Corpus, test: Corpus | None, model_config: ModelConfig, train_config: TrainConfig,
                 data_config: DataConfig, fold_count: int, device: torch.device | str, cache_dir: str | None,
                 ctx: DistContext, spread: bool) -> FoldsResult:
    """``fold_count`` models, each validated on its own fold (:mod:`textorch.tagging.folds`)."""
    embeddings = _embeddings(data_config, cache_dir, ctx)
    return train_folds(train, test, model_config, train_config, data_config, fold_count, embeddings, device, ctx, spread)


def _train_incremental(input_model: str, train: Corpus, valid: Corpus | None, train_config: TrainConfig,
                       device: torch.device | str, cache_dir: str | None, ctx: DistContext) -> SequenceLabeler:
    """The saved model trained further on ``train``; its history goes on with one more run."""
    labeler, previous = _continue_from(input_model, train, device, cache_dir, train_config.seed)
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


def _already_trained(run: RunCheckpoints, test: Corpus | None, splits: dict, device: str | torch.device,
                     cache_dir: str | None, ctx: DistContext) -> TrainOutcome:
    """``--resume`` of a run that had finished: its model (scored again on the test data when it
    was saved) or, without ``--output``, the test scores it recorded."""
    labeler = run.finished_model(lambda directory: SequenceLabeler.load(directory, device=device, cache_dir=cache_dir))
    if labeler is None:
        return TrainOutcome(None, run.record.get("test_scores"), splits)
    scores = labeler.evaluate(test, ctx=ctx) if test is not None else None
    return TrainOutcome(labeler, scores, splits)


def _continue_from(input_model: str, train: Corpus, device: torch.device | str, cache_dir: str | None,
                   seed: int) -> tuple[SequenceLabeler, list]:
    """The saved model, vocabularies and layers grown for ``train``, and its earlier history runs."""
    labeler = SequenceLabeler.load(input_model, device=device, cache_dir=cache_dir)
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
