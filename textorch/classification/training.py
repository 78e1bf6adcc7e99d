"""Training a text classifier: read and check all data first, split it, train, score, save.

:func:`train_classifier_on` is the one training path: ``cls train``/``train-eval`` (through
:func:`train_classifier`, which reads files) and :func:`train_text_classifier` (the Python API:
files or corpora) end there, with the hold-out rule of both tasks
(:func:`textorch.data.splits.training_splits`, stratified by label here). Each function takes
plain values (paths, configs) and returns results; the CLI parses and prints only.

Training sits above the model: this module builds and loads :class:`TextClassifier` objects and
gives them back; the class itself knows nothing of it (it fits its members, ``fit``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
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
from textorch.model_dir import check_writable
from textorch.onnx.trained_export import export_after_training
from textorch.train.dist import DistContext, resolve_device
from textorch.train.fold_spread import spread_folds
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.output_lock import training_output
from textorch.train.resume import COMPLETE, RunCheckpoints, describe_run, prepare_run

logger = logging.getLogger(__name__)

@dataclass
class ClsTrainOutcome:
    classifier: TextClassifier | None
    """None only when ``--resume`` found a finished run without ``--output``."""
    test_scores: dict | None = None
    """Scores of the model (the ensemble with several folds) on the test data."""
    fold_scores: list[dict] = field(default_factory=list)
    """With several folds: each member's scores on the test data, else on its held-out fold."""
    fold_scores_on: str = ""
    splits: dict = field(default_factory=dict)

    def metrics(self) -> dict | None:
        """The ``--metrics-json`` document: test scores, plus per-fold scores, mean and sd with folds."""
        if self.test_scores is None:
            return None
        document = dict(self.test_scores)
        if len(self.fold_scores) > 1:
            document["folds"] = {"scores_on": self.fold_scores_on, "scores": self.fold_scores, **summarize_folds(self.fold_scores)}
        return document


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
    spread = spread_folds(fold_parallel, model_config.fold_count, ctx.world_size)
    if output is not None:
        check_writable(output)
    # Spread members are checkpointed by the process that trains them: not the same run as
    # data-parallel members, so resuming across the two ways is refused.
    options = {"hold_out_test": hold_out_test, **({"fold_parallel": True} if spread else {})}
    with training_output(output, ctx):  # one training at a time into one output
        run = prepare_run(checkpoints, output, lambda: describe_run(
            TASK, {"model": asdict(model_config), "train": asdict(train_config), "data": asdict(data_config)},
            {"train": train_path, "valid": valid_path, "test": test_path}, options, ctx.world_size), ctx)
        train = read_labelled(train_path, data_config)
        data_config = replace(data_config, format=data_config.format or train.format)
        valid = read_labelled(valid_path, data_config) if valid_path else None
        test = read_labelled(test_path, data_config) if test_path else None
        return _train_checked(train, output, model_config, train_config, data_config, valid, test,
                              hold_out_test, device, cache_dir, ctx, spread, run)


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
    ctx = ctx or DistContext()
    spread = spread_folds(fold_parallel, model_config.fold_count, ctx.world_size)
    if output is not None:
        check_writable(output)
    with training_output(output, ctx):
        return _train_checked(train, output, model_config, train_config, data_config, valid, test,
                              hold_out_test, device, cache_dir, ctx, spread, run)


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


def _train_checked( train: ClsCorpus, output: str | None, model_config: ClsModelConfig, train_config: TrainConfig,
    data_config: ClsDataConfig, valid: ClsCorpus | None, test: ClsCorpus | None, hold_out_test: bool, device: str,
    cache_dir: str | None, ctx: DistContext, spread: bool, run: RunCheckpoints | None,
) -> ClsTrainOutcome:
    """:func:`train_classifier_on` once ``output`` was checked, by either door, once."""
    data_config = replace(data_config, format=data_config.format or train.format)  # saved: how to read its files
    if valid is not None and model_config.fold_count > 1:
        raise ConfigError("--valid cannot be used with --fold-count > 1: each member is validated on its held-out fold")
    wants_valid = train_config.early_stop and model_config.fold_count == 1
    train, valid, test = training_splits(train, valid, test, hold_out_test=hold_out_test, seed=train_config.seed,
                                         valid_fraction=train_config.valid_fraction if wants_valid else None,
                                         notes=("held out as test", "held out for validation"))
    splits = {"train": len(train), "valid": len(valid) if valid else 0, "test": len(test) if test else 0}
    logger.info("data: %s (%s) - %d train, %d valid, %d test texts", train.path, train.format, *splits.values())
    if run is not None and run.status == COMPLETE:
        return _already_trained(run, test, splits, device, cache_dir, ctx)
    from textorch.embeddings.for_models import open_for_training

    embeddings = open_for_training(data_config.embeddings, cache_dir)
    classifier = TextClassifier.build(train, model_config, data_config, embeddings, device, seed=train_config.seed)
    if test is not None:
        classifier.targets(test)  # unknown test labels fail now, not after training
    reports = classifier.fit(train, valid, train_config, ctx, run.checkpointer if run is not None else None, spread)
    for report in reports:
        result = report.training
        logger.info("member %d: %d epochs in %.1fs, best epoch %d, valid macro-F1 %s", report.fold, len(result.history),
                    result.train_seconds, result.best_epoch,
                    "-" if report.valid_scores is None else f"{report.valid_scores['macro']['f1']:.4f}")
    outcome = ClsTrainOutcome(classifier, splits=splits)
    if test is not None:
        outcome.test_scores = classifier.evaluate(test, ctx=ctx)
    if model_config.fold_count > 1:
        if test is not None:
            outcome.fold_scores = [classifier.evaluate(test, member=i, ctx=ctx) for i in range(model_config.fold_count)]
            outcome.fold_scores_on = "test"
        else:
            outcome.fold_scores = [r.valid_scores for r in reports]
            outcome.fold_scores_on = "held-out fold"
    _record_in_history(classifier, outcome, test)
    if output is not None and run is not None:
        run.before_save(ctx)
    if output is not None and ctx.is_main:
        classifier.save(output, run.model_record() if run is not None else None)
        logger.info("model saved to %s", output)
    export_after_training(classifier, output, ctx, valid, train, train_config.seed)
    ctx.barrier()
    if run is not None:
        run.finish(ctx, outcome.test_scores)
    return outcome


def _already_trained(run: RunCheckpoints, test: ClsCorpus | None, splits: dict, device: str, cache_dir: str | None,
                     ctx: DistContext) -> ClsTrainOutcome:
    """``--resume`` of a finished run: its saved model, scored again on the test data, or, without
    ``--output``, the test scores it recorded."""
    classifier = run.finished_model(lambda directory: TextClassifier.load(directory, device=device, cache_dir=cache_dir))
    if classifier is None:
        return ClsTrainOutcome(None, run.record.get("test_scores"), splits=splits)
    outcome = ClsTrainOutcome(classifier, splits=splits)
    if test is not None:
        outcome.test_scores = classifier.evaluate(test, ctx=ctx)
        if classifier.model_config.fold_count > 1:
            outcome.fold_scores = [classifier.evaluate(test, member=i, ctx=ctx) for i in range(classifier.model_config.fold_count)]
            outcome.fold_scores_on = "test"
    return outcome


def _record_in_history(classifier: TextClassifier, outcome: ClsTrainOutcome, test: ClsCorpus | None) -> None:
    """Test scores and the n-fold summary go into history.json beside the per-epoch records."""
    history = classifier.history
    if history is None:
        return
    if outcome.test_scores is not None and test is not None:
        history.final_scores, history.final_scores_on = outcome.test_scores, str(test.path)
    if len(outcome.fold_scores) > 1:
        history.folds = {"scores_on": outcome.fold_scores_on, "scores": outcome.fold_scores,
                         **summarize_folds(outcome.fold_scores)}
