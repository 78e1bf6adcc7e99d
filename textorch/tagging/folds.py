"""n-fold training of a sequence labeller: N models, each validated on its own fold; the best is kept.

DeLFT users run ``--fold-count 10`` to see how much a score depends on the split and the random
initialisation. Fold ``i`` trains on every other fold and is validated (early stopping) on fold
``i``. Each fold's model is scored on the test data when there is some, else on its own fold;
the scores are reported per fold and as mean and standard deviation per label.

The model kept is the one with the best F1 on its *validation* fold: choosing it by test score,
as DeLFT does, would make the reported test score of the kept model optimistic.

With several processes the folds are either trained in turn, each on all processes (data
parallel), or dealt to the processes whole (``--fold-parallel``, :mod:`textorch.train.fold_spread`).
Fold ``i``'s random numbers depend on the seed and ``i`` only (initialisation from ``seed + i``),
so a fold trained whole by any process gives the model (and the scores) one process gives it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from textorch.tagging.config import TASK, DataConfig, ModelConfig, TrainConfig
from textorch.tagging.labeler import SequenceLabeler
from textorch.data.corpus import Corpus
from textorch.data.splits import fold_indices
from textorch.eval.training_report import summarize_label_folds
from textorch.train.dist import DistContext
from textorch.train.fold_spread import FoldExchange, fold_exchange
from textorch.train.history import RunRecord, TrainingHistory

logger = logging.getLogger(__name__)


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


@dataclass
class FoldRun:
    """What one fold's training gave besides its model: small enough to send between processes."""

    valid_scores: dict
    test_scores: dict | None
    record: RunRecord


@dataclass
class _FoldJob:
    """Everything a fold's training needs besides the fold's index."""

    train: Corpus
    test: Corpus | None
    folds: list[list[int]]
    model_config: ModelConfig
    train_config: TrainConfig
    data_config: DataConfig
    embeddings: object | None
    device: torch.device | str

    def run(self, i: int, ctx: DistContext) -> tuple[SequenceLabeler, FoldRun]:
        """Train fold ``i`` (on every fold but ``i``, validated on ``i``) and score its model."""
        train, k, train_config = self.train, len(self.folds), self.train_config
        held_set = set(self.folds[i])
        part = replace(train, sequences=[s for j, s in enumerate(train.sequences) if j not in held_set])
        fold = replace(train, sequences=[train.sequences[j] for j in self.folds[i]], path=f"{train.path} (fold {i + 1}/{k})")
        config = train_config
        if train_config.tensorboard_dir:
            config = replace(train_config, tensorboard_dir=str(Path(train_config.tensorboard_dir) / f"fold-{i + 1}"))
        logger.info("fold %d/%d: %d train, %d validation sequences", i + 1, k, len(part), len(fold))
        labeler = SequenceLabeler.build(part, self.model_config, self.data_config, self.embeddings, self.device,
                                         seed=train_config.seed + i)
        training = labeler.fit(part, fold if train_config.early_stop else None, config, ctx=ctx)
        valid_scores = labeler.evaluate(fold, ctx=ctx)
        test_scores = labeler.evaluate(self.test, ctx=ctx) if self.test is not None else None
        run = FoldRun(valid_scores, test_scores, RunRecord.from_result(f"fold {i + 1}", training))
        _log_fold(i, k, run)
        return labeler, run


def _log_fold(i: int, k: int, run: FoldRun, where: str = "") -> None:
    logger.info("fold %d/%d%s: validation f1 %.4f%s", i + 1, k, where, run.valid_scores["f1"],
                f", test f1 {run.test_scores['f1']:.4f}" if run.test_scores is not None else "")


def kept_fold(runs: list[FoldRun]) -> int:
    """The fold with the best validation F1; the first of equals (what training in order keeps)."""
    f1 = [run.valid_scores["f1"] for run in runs]
    return f1.index(max(f1))


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
    spread: bool = False,
) -> FoldsResult:
    """Train ``fold_count`` models; only the best one (by validation F1) stays in memory.

    ``spread`` (with several processes): each process trains its own folds alone, see
    :mod:`textorch.train.fold_spread`; otherwise every fold is trained on all processes in turn.
    Every process returns the same result, the kept model included.
    """
    ctx = ctx or DistContext()
    job = _FoldJob(train, test, fold_indices(len(train.sequences), fold_count, train_config.seed), model_config,
                   train_config, data_config, embeddings, device)
    if spread and ctx.enabled:
        with fold_exchange(ctx, fold_count) as exchange:
            best, runs, kept = _spread(job, exchange, ctx)
    else:
        best, runs, kept = _in_turn(job, ctx)
    result = FoldsResult(best, kept, [r.valid_scores for r in runs],
                         [r.test_scores for r in runs] if test is not None else [])  # type: ignore[misc]
    best.history = TrainingHistory(TASK, "f1", [r.record for r in runs], kept_run=kept, folds=result.summary())
    logger.info("n-fold: kept the model of fold %d (best validation f1)", kept + 1)
    return result


def _in_turn(job: _FoldJob, ctx: DistContext) -> tuple[SequenceLabeler, list[FoldRun], int]:
    """Each fold after the other, every one on all processes."""
    best: SequenceLabeler | None = None
    runs: list[FoldRun] = []
    for i in range(len(job.folds)):
        labeler, run = job.run(i, ctx)
        runs.append(run)
        if kept_fold(runs) == i:  # the best so far: the one before it can go
            best = labeler
    assert best is not None
    return best, runs, kept_fold(runs)


def _spread(job: _FoldJob, exchange: FoldExchange, ctx: DistContext) -> tuple[SequenceLabeler, list[FoldRun], int]:
    """This process's folds alone, then every fold's scores and the kept model on every process."""
    mine: dict[int, FoldRun] = {}
    best: SequenceLabeler | None = None
    best_fold = -1
    for i in exchange.mine:
        labeler, mine[i] = job.run(i, ctx.alone())
        if kept_fold(list(mine.values())) == len(mine) - 1:  # the best of this process's folds so far
            best, best_fold = labeler, i
    runs = exchange.gather(mine)
    for i, run in enumerate(runs):
        if exchange.owner(i) != ctx.rank:
            _log_fold(i, len(runs), run, f" (rank {exchange.owner(i)})")
    kept = kept_fold(runs)
    owner = exchange.owner(kept)
    if owner == ctx.rank:
        # The first best of all folds is also the first best of its owner's folds.
        assert best is not None and best_fold == kept, (best_fold, kept)
        with exchange.shared_directory(owner, best.save):
            return best, runs, kept
    with exchange.shared_directory(owner, None) as directory:
        # PyTorch, as on the owner's process: a model of the training path, exported (if at all) where it is saved.
        return SequenceLabeler.load(directory, device=job.device, embeddings=job.embeddings, engine="torch"), runs, kept
