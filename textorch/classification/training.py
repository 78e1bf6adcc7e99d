"""Training a text classifier: read and check all data first, split it, train, score, save.

:func:`train_classifier_on` is the one training path: ``cls train``/``train-eval`` (through
:func:`train_classifier`, which reads files) and :func:`train_text_classifier` (the Python API:
files or corpora) end there, with the hold-out rule of both tasks
(:func:`textorch.data.splits.training_splits`, stratified by label here). Each function takes
plain values (paths, configs) and returns results; the CLI parses and prints only. The run itself
(the output held, checkpoints, a finished run recognised, scoring, recording, saving, the outcome)
is :class:`textorch.train.run.TrainingRun`'s, as for tagging; :class:`_ClassifierRun` supplies what
a classifier does its own way.

Training sits above the model: this module builds and loads :class:`TextClassifier` objects and
gives them back; the class itself knows nothing of it (it fits its members, ``fit``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from textorch.classification.classifier import TextClassifier
from textorch.classification.classify_files import read_labelled
from textorch.classification.config import TASK, ClsDataConfig, ClsModelConfig
from textorch.train.config import TrainConfig, sort_options
from textorch.data.cls_readers import ClsCorpus
from textorch.data.splits import training_splits
from textorch.errors import ConfigError
from textorch.eval.cls_metrics import summarize_folds
from textorch.onnx.trained_export import export_after_training
from textorch.train.dist import DistContext, resolve_device
from textorch.train.fold_spread import spread_folds
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.resume import RunCheckpoints, describe_run
from textorch.train.run import Fitted, RunOutcome, TrainingRun

logger = logging.getLogger(__name__)

class ClsTrainOutcome(RunOutcome[TextClassifier]):
    """What a classifier's training gives back (:class:`textorch.train.run.RunOutcome`): the
    classifier, its test scores (the ensemble's with several folds), the split sizes and, with
    several folds, their summary: each member's scores on the test data, else on its held-out fold."""

    @property
    def classifier(self) -> TextClassifier | None:
        """The trained (or, for a finished run resumed, saved) model; None only when ``--resume``
        found a finished run without ``--output``."""
        return self.model

    @property
    def fold_scores(self) -> list[dict]:
        """With several folds: each member's scores (on :attr:`fold_scores_on`); else empty."""
        return self.folds["scores"] if self.folds is not None else []

    @property
    def fold_scores_on(self) -> str:
        return self.folds["scores_on"] if self.folds is not None else ""

    def metrics(self) -> dict | None:
        """The ``--metrics-json`` document: test scores, plus per-fold scores, mean and sd with
        folds; nothing without test scores."""
        return super().metrics() if self.test_scores is not None else None


def train_classifier(
    train_path: str,
    output: str | None,
    model_config: ClsModelConfig,
    train_config: TrainConfig,
    data_config: ClsDataConfig,
    valid_path: str | None = None,
    test_path: str | None = None,
    hold_out_test: bool = False,
    device: str = "cpu",
    cache_dir: str | None = None,
    ctx: DistContext | None = None,
    checkpoints: CheckpointOptions | None = None,
    fold_parallel: str = "auto",
) -> ClsTrainOutcome:
    """``cls train`` and ``cls train-eval``: split, train (n-fold or not), score, save.

    With ``checkpoints`` (and ``output`` or ``checkpoints.directory``) each member's training
    state is saved as it goes, and ``checkpoints.resume`` continues an interrupted run or
    reports a finished one (:mod:`textorch.train.resume`).

    Splits are stratified by label and seeded by ``train_config.seed``: with ``hold_out_test``
    and no test file, 10 % of the training data is the test set; with one fold, early stopping
    uses ``valid_path`` or else ``valid_fraction`` of what remains; with N folds each member is
    validated on its own fold. ``fold_parallel`` (``auto``, ``true``, ``false``): whether several
    processes train whole members side by side rather than each member together, see
    :mod:`textorch.train.fold_spread`.
    """
    ctx = ctx or DistContext()
    steps = _ClassifierRun(output, (model_config, train_config, data_config), hold_out_test, device, cache_dir, ctx,
                           fold_parallel)
    # Spread members are checkpointed by the process that trains them: not the same run as
    # data-parallel members, so resuming across the two ways is refused.
    options = {"hold_out_test": hold_out_test, **({"fold_parallel": True} if steps.spread else {})}

    def describe() -> dict:
        return describe_run(TASK, {"model": asdict(model_config), "train": asdict(train_config), "data": asdict(data_config)},
                            {"train": train_path, "valid": valid_path, "test": test_path}, options, ctx.world_size)

    def read() -> tuple[ClsCorpus, ClsCorpus | None, ClsCorpus | None]:
        train = read_labelled(train_path, data_config)
        read_as = replace(data_config, format=data_config.format or train.format)
        return (train, read_labelled(valid_path, read_as) if valid_path else None,
                read_labelled(test_path, read_as) if test_path else None)

    return steps.from_files(checkpoints, describe, read)  # type: ignore[return-value]  # a ClsTrainOutcome


def train_classifier_on(
    train: ClsCorpus,
    output: str | None,
    model_config: ClsModelConfig,
    train_config: TrainConfig,
    data_config: ClsDataConfig,
    valid: ClsCorpus | None = None,
    test: ClsCorpus | None = None,
    hold_out_test: bool = False,
    device: str = "cpu",
    cache_dir: str | None = None,
    ctx: DistContext | None = None,
    fold_parallel: str = "auto",
    run: RunCheckpoints | None = None,
) -> ClsTrainOutcome:
    """Split, train (n-fold or not), score the test data, save: :func:`train_classifier` on corpora
    already read. ``run``: the checkpoints of this run, as :func:`train_classifier` prepares them."""
    steps = _ClassifierRun(output, (model_config, train_config, data_config), hold_out_test, device, cache_dir,
                           ctx or DistContext(), fold_parallel)
    return steps.on_corpora(train, valid, test, run)  # type: ignore[return-value]  # a ClsTrainOutcome


def train_text_classifier(
    train: str | Path | ClsCorpus,
    valid: str | Path | ClsCorpus | None = None,
    architecture: str | None = None,
    embeddings: str = ClsDataConfig.embeddings,
    output: str | Path | None = None,
    *,
    device: str = "cpu",
    cache_dir: str | None = None,
    **options: Any,
) -> TextClassifier:
    """Train a classifier (an ensemble with ``fold_count=N``), as ``textorch cls train`` does.

    Args:
        train: labelled CSV/TSV/JSONL file (or a shared corpus), read as ``cls train`` does
            (:func:`train_classifier`), or a :class:`ClsCorpus` already read (:func:`train_classifier_on`).
        valid: validation data for early stopping; None holds out ``valid_fraction`` of
            ``train`` (stratified, seeded), as the CLI does. A path beside a corpus is read here.
        architecture: a name from ``textorch cls architectures``; None: ``bert`` with a
            ``transformer`` option, else the default.
        embeddings: registry name or path of word vectors, or ``"none"``.
        output: model directory to write.
        **options: any field of ``ClsModelConfig``, ``TrainConfig`` or ``ClsDataConfig``.

    Returns:
        The trained classifier; ``fold_reports`` holds each member's training.
    """
    if architecture is None:
        architecture = "bert" if options.get("transformer") else ClsModelConfig.architecture
    configs = sort_options({**options, "architecture": architecture, "embeddings": embeddings},
                           (ClsModelConfig, TrainConfig, ClsDataConfig))
    where = str(resolve_device(device, DistContext()))
    out = None if output is None else str(output)
    if isinstance(train, (str, Path)) and (valid is None or isinstance(valid, (str, Path))):
        outcome = train_classifier(str(train), out, *configs, valid_path=None if valid is None else str(valid),
                                   device=where, cache_dir=cache_dir)
        return outcome.classifier  # type: ignore[return-value]  # a new run always has its model
    data_config = configs[2]
    if not isinstance(train, ClsCorpus):
        train = read_labelled(str(train), data_config)
    if valid is not None and not isinstance(valid, ClsCorpus):
        valid = read_labelled(str(valid), data_config)
    outcome = train_classifier_on(train, out, *configs, valid=valid, device=where, cache_dir=cache_dir)
    return outcome.classifier  # type: ignore[return-value]


class _ClassifierRun(TrainingRun[TextClassifier, ClsCorpus]):
    """What a classifier's run does its own way (:class:`textorch.train.run.TrainingRun` does the
    rest): splits stratified by label (no validation share with several folds: each member is
    validated on its own fold), the members fitted (each checkpointed when the run is), and the
    members scored one by one besides the ensemble."""

    model_type = TextClassifier
    outcome_type = ClsTrainOutcome
    data_line = "data: %s (%s) - %d train, %d valid, %d test texts"

    def __init__(self, output: str | None, configs: tuple[ClsModelConfig, TrainConfig, ClsDataConfig],
                 hold_out_test: bool, device: str, cache_dir: str | None, ctx: DistContext, fold_parallel: str) -> None:
        self.model_config, self.train_config, self.data_config = configs
        self.spread = spread_folds(fold_parallel, self.model_config.fold_count, ctx.world_size)
        """Whether members are spread over the processes."""
        super().__init__(output, ctx, device, cache_dir)
        self.hold_out_test = hold_out_test

    def split(self, train: ClsCorpus, valid: ClsCorpus | None,
              test: ClsCorpus | None) -> tuple[ClsCorpus, ClsCorpus | None, ClsCorpus | None]:
        self.data_config = replace(self.data_config, format=self.data_config.format or train.format)  # saved: how to read its files
        if valid is not None and self.model_config.fold_count > 1:
            raise ConfigError("--valid cannot be used with --fold-count > 1: each member is validated on its held-out fold")
        wants_valid = self.train_config.early_stop and self.model_config.fold_count == 1
        return training_splits(train, valid, test, hold_out_test=self.hold_out_test, seed=self.train_config.seed,
                               valid_fraction=self.train_config.valid_fraction if wants_valid else None,
                               notes=("held out as test", "held out for validation"))

    def fit(self, train: ClsCorpus, valid: ClsCorpus | None, test: ClsCorpus | None) -> Fitted[TextClassifier]:
        from textorch.embeddings.for_models import open_for_training

        embeddings = open_for_training(self.data_config.embeddings, self.cache_dir)
        classifier = TextClassifier.build(train, self.model_config, self.data_config, embeddings, self.device,
                                          seed=self.train_config.seed)
        if test is not None:
            classifier.targets(test)  # unknown test labels fail now, not after training
        reports = classifier.fit(train, valid, self.train_config, self.ctx,
                                 self.run.checkpointer if self.run is not None else None, self.spread)
        for report in reports:
            result = report.training
            logger.info("member %d: %d epochs in %.1fs, best epoch %d, valid macro-F1 %s", report.fold,
                        len(result.history), result.train_seconds, result.best_epoch,
                        "-" if report.valid_scores is None else f"{report.valid_scores['macro']['f1']:.4f}")
        if self.model_config.fold_count > 1 and test is None:  # with test data, the members are scored there
            return Fitted(classifier, folds=_fold_summary([r.valid_scores for r in reports], "held-out fold"))
        return Fitted(classifier)

    def score(self, model: TextClassifier, test: ClsCorpus) -> tuple[dict, dict | None]:
        """The ensemble's scores, and with several folds each member's."""
        scores = model.evaluate(test, ctx=self.ctx)
        count = model.model_config.fold_count
        if count <= 1:
            return scores, None
        return scores, _fold_summary([model.evaluate(test, member=i, ctx=self.ctx) for i in range(count)], "test")

    def export(self, model: TextClassifier, output: str, valid: ClsCorpus | None, train: ClsCorpus) -> None:
        export_after_training(model, output, self.ctx, valid, train, self.train_config.seed)


def _fold_summary(scores: list[dict], on: str) -> dict:
    """The folds' record: what the members were scored on, their scores, mean and sd."""
    return {"scores_on": on, "scores": scores, **summarize_folds(scores)}
