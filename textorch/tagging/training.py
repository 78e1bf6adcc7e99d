"""Training a tagger: read and check the data, split it, train, score the test data, save.

:func:`train_corpora` is the one training path. ``seq train``/``train-eval`` (through
:func:`train_tagger`, which reads files), ``grobid``/``ner`` (corpora the presets read), the DeLFT
facade, :func:`train_sequence_labeler` (the Python API: files or corpora), n-fold training and
``--incremental`` all end there, so the splits (:func:`textorch.data.splits.training_splits`:
same fractions, same seeds), the logging and the saving are the same whatever the door:
``grobid date train-eval`` and ``seq train-eval`` on the same file train and test on the same
sequences. The run itself (the output held, checkpoints, a finished run recognised, scoring,
recording, saving, the outcome) is :class:`textorch.train.run.TrainingRun`'s, as for
classification; :class:`_TaggerRun` supplies what a tagger does its own way.

Training sits above the model: this module builds and loads :class:`SequenceLabeler` objects
and gives them back; the class itself knows nothing of it (it fits one network, ``fit``).
"""

from __future__ import annotations

from dataclasses import replace

import logging
from pathlib import Path
from typing import Any

import torch

from textorch.tagging.config import TASK, DataConfig, ModelConfig, TrainConfig, named_feature_columns, to_dict
from textorch.tagging.folds import train_folds
from textorch.tagging.incremental import prepare_incremental
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_data import fitted_to_data, split_for_training
from textorch.data.corpus import Corpus
from textorch.data.checked_read import read_validated
from textorch.data.features import require_feature_columns_of
from textorch.errors import ConfigError, DataError, ModelFormatError
from textorch.onnx.trained_export import export_after_training
from textorch.tagging.inputs import as_corpus
from textorch.tagging.learned_check import learned_nothing, nothing_to_learn
from textorch.train.config import sort_options
from textorch.train.dist import DistContext, resolve_device
from textorch.train.fold_spread import spread_folds
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.resume import RunCheckpoints, describe_run
from textorch.train.history import read_history
from textorch.train.run import Fitted, RunOutcome, TrainingRun

logger = logging.getLogger(__name__)


class TrainOutcome(RunOutcome[SequenceLabeler]):
    """What a tagger's training gives back (:class:`textorch.train.run.RunOutcome`): the labeler,
    its test scores, the split sizes and, with n folds, their summary (per-fold scores, mean and
    sd per label, the index of the kept fold)."""

    @property
    def labeler(self) -> SequenceLabeler | None:
        """The trained (or, for a finished run resumed, saved) model; None only when ``--resume``
        found a finished run without ``--output``."""
        return self.model


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
    if checkpoints is not None and (fold_count != 1 or input_model):
        raise ConfigError("checkpoints are not available with --fold-count/--incremental yet")
    ctx = ctx or DistContext()
    steps = _TaggerRun(output, (model_config, train_config, data_config), hold_out_test, fold_count, input_model,
                       device, cache_dir, ctx, fold_parallel)

    def describe() -> dict:
        return describe_run(TASK, {"model": to_dict(model_config), "train": to_dict(train_config), "data": to_dict(data_config)},
                            {"train": train_path, "valid": valid_path, "test": test_path},
                            {"hold_out_test": hold_out_test, "skip_bad_sequences": skip_bad_sequences}, ctx.world_size)

    def read() -> tuple[Corpus, Corpus | None, Corpus | None]:
        corpora = read_validated(train_path, valid_path, test_path, data_config.format,
                                 train_config.max_sequence_length, skip_bad_sequences)
        return require_feature_columns_of(corpora, named_feature_columns(model_config, data_config), skip_bad_sequences)

    return steps.from_files(checkpoints, describe, read)  # type: ignore[return-value]  # a TrainOutcome


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
    steps = _TaggerRun(output, (model_config, train_config, data_config), hold_out_test, fold_count, input_model,
                       device, cache_dir, ctx or DistContext(), fold_parallel)
    return steps.on_corpora(train, valid, test, run)  # type: ignore[return-value]  # a TrainOutcome


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


class _TaggerRun(TrainingRun[SequenceLabeler, Corpus]):
    """What a tagger's run does its own way (:class:`textorch.train.run.TrainingRun` does the rest):
    the hold-out splits and the training options fitted to them, and one of three modes: continued
    training (``input_model``), n folds, or one new model, checkpointed when the run is."""

    model_type = SequenceLabeler
    outcome_type = TrainOutcome
    data_line = "data: %s (%s) — %d train, %d valid, %d test sequences"

    def __init__(self, output: str | None, configs: tuple[ModelConfig, TrainConfig, DataConfig], hold_out_test: bool,
                 fold_count: int, input_model: str | None, device: torch.device | str, cache_dir: str | None,
                 ctx: DistContext, fold_parallel: str) -> None:
        if fold_count < 1:
            raise ConfigError(f"--fold-count must be >= 1, got {fold_count}")
        self.spread = spread_folds(fold_parallel, fold_count, ctx.world_size)
        """Whether folds are spread over the processes."""
        if input_model and fold_count > 1:
            raise ConfigError("--incremental and --fold-count > 1 cannot be combined")
        super().__init__(output, ctx, device, cache_dir)
        self.model_config, self.train_config, self.data_config = configs
        self.hold_out_test, self.fold_count, self.input_model = hold_out_test, fold_count, input_model

    def split(self, train: Corpus, valid: Corpus | None, test: Corpus | None) -> tuple[Corpus, Corpus | None, Corpus | None]:
        if self.ctx.is_main and (problem := nothing_to_learn(train)):
            logger.warning("%s", problem)
        train, valid, test = split_for_training(train, valid, test, self.hold_out_test, self.train_config, self.fold_count)
        config = self.train_config
        if self.input_model and config.template_only_from_tokens:
            # A saved network trained further stays a network: the rule would zero its emission layer.
            config = replace(config, template_only_from_tokens=0)
        self.train_config = fitted_to_data(config, [len(s) for s in train.sequences], valid is not None or self.fold_count > 1)
        return train, valid, test

    def fit(self, train: Corpus, valid: Corpus | None, test: Corpus | None) -> Fitted[SequenceLabeler]:
        early_stop_on = valid if self.train_config.early_stop else None
        if self.input_model:
            return Fitted(self._incremental(self.input_model, train, early_stop_on))
        if self.fold_count > 1:
            folds = train_folds(train, test, self.model_config, self.train_config, self.data_config, self.fold_count,
                                self._embeddings(), self.device, self.ctx, self.spread)
            return Fitted(folds.labeler, folds.test_scores[folds.kept] if test is not None else None, folds.summary())
        return Fitted(self._one(train, early_stop_on))

    def export(self, model: SequenceLabeler, output: str, valid: Corpus | None, train: Corpus) -> None:
        export_after_training(model, output, self.ctx, valid, train, self.train_config.seed)

    def _one(self, train: Corpus, valid: Corpus | None) -> SequenceLabeler:
        """One new model, checkpointed when the run is."""
        labeler = SequenceLabeler.build(train, self.model_config, self.data_config, self._embeddings(), self.device,
                                        seed=self.train_config.seed)
        labeler.fit(train, valid, self.train_config, ctx=self.ctx,
                    checkpoints=self.run.checkpointer() if self.run is not None else None)
        _log_training(labeler)
        _warn_if_nothing_learned(labeler, train)
        return labeler

    def _incremental(self, input_model: str, train: Corpus, valid: Corpus | None) -> SequenceLabeler:
        """The saved model trained further on ``train``; its history goes on with one more run."""
        labeler, previous = _continue_from(input_model, train, self.device, self.cache_dir, self.train_config.seed)
        labeler.fit(train, valid, self.train_config, ctx=self.ctx)
        _warn_if_nothing_learned(labeler, train)
        if labeler.history is not None:
            last = labeler.history.runs[-1]
            last.name, last.continues = "incremental", True
            labeler.history.runs = [*previous, last]
        return labeler

    def _embeddings(self):
        """The word vectors of a new model; one process per machine builds their cache."""
        from textorch.embeddings.for_models import open_for_training

        with self.ctx.local_main_first():
            return open_for_training(self.data_config.embeddings, self.cache_dir)


def _warn_if_nothing_learned(labeler: SequenceLabeler, train: Corpus) -> None:
    if problem := learned_nothing(labeler, train):
        logger.warning("%s", problem)


def _log_training(labeler: SequenceLabeler) -> None:
    result = labeler.training_result
    if labeler.word_table is not None:
        logger.info("word vectors found for %.1f%% of distinct words", 100 * labeler.word_table.coverage())
    logger.info(
        "trained %d epochs in %.1fs (%.0f tokens/s), best epoch %d",
        len(result.history), result.train_seconds, result.tokens_per_s, result.best_epoch,
    )


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
