"""n-fold training of a sequence labeller: N models, each validated on its own fold; the best is kept.

DeLFT users run ``--fold-count 10`` to see how much a score depends on the split and the random
initialisation. Fold ``i`` trains on every other fold and is validated (early stopping) on fold
``i``. Each fold's model is scored on the test data when there is some, else on its own fold;
the scores are reported per fold and as mean and standard deviation per label.

The model kept is the one with the best F1 on its *validation* fold: choosing it by test score,
as DeLFT does, would make the reported test score of the kept model optimistic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from textorch.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.errors import ConfigError
from textorch.eval.training_report import summarize_label_folds
from textorch.labeler import TASK, SequenceLabeler
from textorch.train.dist import DistContext
from textorch.train.history import RunRecord, TrainingHistory

logger = logging.getLogger(__name__)


def fold_indices(n: int, k: int, seed: int) -> list[list[int]]:
    """``k`` disjoint folds covering ``range(n)``, sizes differing by at most one, seeded."""
    if k < 2:
        raise ConfigError(f"--fold-count must be >= 2 for n-fold training, got {k}")
    if n < k:
        raise ConfigError(f"--fold-count {k} needs at least {k} training sequences, got {n}")
    order = np.random.default_rng(seed).permutation(n)
    return [sorted(part.tolist()) for part in np.array_split(order, k)]


@dataclass
class FoldsResult:
    """The kept model and what each fold's model scored."""

    labeler: SequenceLabeler
    kept: int
    valid_scores: list[dict] = field(default_factory=list)
    test_scores: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        """Per-fold scores (on the test data when there was some) with mean and sd per label."""
        scores, on = (self.test_scores, "test") if self.test_scores else (self.valid_scores, "held-out fold")
        return {
            "scores_on": on,
            "scores": scores,
            "kept": self.kept,
            "valid_f1": [s["f1"] for s in self.valid_scores],
            **summarize_label_folds(scores),
        }


def train_folds(
    train: Corpus,
    test: Corpus | None,
    model_config: ModelConfig,
    train_config: TrainConfig,
    data_config: DataConfig,
    fold_count: int,
    embeddings: object | None = None,
    device: torch.device | str = "cpu",
    ctx: DistContext | None = None,
) -> FoldsResult:
    """Train ``fold_count`` models; only the best one (by validation F1) stays in memory."""
    ctx = ctx or DistContext()
    folds = fold_indices(len(train.sequences), fold_count, train_config.seed)
    best: SequenceLabeler | None = None
    result = FoldsResult(labeler=None, kept=0)  # type: ignore[arg-type]
    runs: list[RunRecord] = []
    for i, held in enumerate(folds):
        held_set = set(held)
        part = replace(train, sequences=[s for j, s in enumerate(train.sequences) if j not in held_set])
        fold = replace(train, sequences=[train.sequences[j] for j in held], path=f"{train.path} (fold {i + 1}/{fold_count})")
        config = train_config
        if train_config.tensorboard_dir:
            config = replace(train_config, tensorboard_dir=str(Path(train_config.tensorboard_dir) / f"fold-{i + 1}"))
        logger.info("fold %d/%d: %d train, %d validation sequences", i + 1, fold_count, len(part), len(fold))
        labeler = SequenceLabeler.build(part, model_config, data_config, embeddings, device, seed=train_config.seed + i)
        training = labeler.fit(part, fold if train_config.early_stop else None, config, ctx=ctx)
        runs.append(RunRecord.from_result(f"fold {i + 1}", training))
        result.valid_scores.append(labeler.evaluate(fold, ctx=ctx))
        if test is not None:
            result.test_scores.append(labeler.evaluate(test, ctx=ctx))
        logger.info("fold %d/%d: validation f1 %.4f%s", i + 1, fold_count, result.valid_scores[-1]["f1"],
                    f", test f1 {result.test_scores[-1]['f1']:.4f}" if test is not None else "")
        if best is None or result.valid_scores[-1]["f1"] > result.valid_scores[result.kept]["f1"]:
            best, result.kept = labeler, i
    assert best is not None
    result.labeler = best
    best.history = TrainingHistory(TASK, "f1", runs, kept_run=result.kept, folds=result.summary())
    logger.info("n-fold: kept the model of fold %d (best validation f1)", result.kept + 1)
    return result
