"""Training a text classifier from the commands: the training path with ``TextClassifier`` as its class.

``cls train``/``train-eval`` call :func:`train_classifier` (files); :func:`train_classifier_on`
takes corpora already read. Both are :mod:`textorch.classification.training_path`'s functions of
the same names, which every training run goes through (``TextClassifier.train`` too), with the
class that builds and loads the models given here. The path lives apart so that the class can run
it without an import cycle.
"""

from __future__ import annotations

from textorch.classification import training_path
from textorch.classification.classifier import TextClassifier
from textorch.classification.config import ClsDataConfig, ClsModelConfig
from textorch.classification.training_path import ClsTrainOutcome
from textorch.data.cls_readers import ClsCorpus
from textorch.train.config import TrainConfig
from textorch.train.dist import DistContext
from textorch.train.resume import CheckpointOptions, RunCheckpoints


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
    """``cls train`` and ``cls train-eval``: split, train (n-fold or not), score, save a
    :class:`TextClassifier`; :func:`textorch.classification.training_path.train_classifier`, where
    the splits, checkpoints and options are described."""
    return training_path.train_classifier(
        TextClassifier, train_path, output, model_config, train_config, data_config, valid_path=valid_path,
        test_path=test_path, hold_out_test=hold_out_test, device=device, cache_dir=cache_dir, ctx=ctx,
        checkpoints=checkpoints, fold_parallel=fold_parallel)


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
    """:func:`train_classifier` on corpora already read, for a :class:`TextClassifier`
    (:func:`textorch.classification.training_path.train_classifier_on`)."""
    return training_path.train_classifier_on(
        TextClassifier, train, output, model_config, train_config, data_config, valid=valid, test=test,
        hold_out_test=hold_out_test, device=device, cache_dir=cache_dir, ctx=ctx, fold_parallel=fold_parallel, run=run)
