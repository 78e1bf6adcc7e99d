"""Classification scores from counts that add up across batches, shards and processes.

Everything a report needs is a sum: per-class TP/FP/FN, the number of examples and of correct
ones, and, for multi-label tasks, per-class histograms of the positive and negative examples'
logits. A distributed evaluation therefore all-reduces one float64 vector
(:meth:`ClassCounts.to_tensor`) and computes the scores once; ROC-AUC and the per-class
decision thresholds come from the histograms, so they need no gathering of raw scores either.

ROC-AUC from a histogram treats two scores in the same bin as a tie (half a concordant pair).
Bins are 1/64 of a logit wide over [-16, 16], so the difference from the exact AUC is at most
half the share of positive-negative pairs that fall in one bin: nil for any model whose scores
are not nearly equal, and bounded in the tests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

LOGIT_LIMIT = 16.0
HIST_BINS = 2048
THRESHOLD_GRID = tuple(round(0.05 * k, 2) for k in range(1, 20))
"""Decision thresholds tried per class when tuning on validation data (0.05 to 0.95)."""


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def _prf(tp: float, fp: float, fn: float) -> tuple[float, float, float]:
    """Precision, recall and F1 (from P and R); a zero denominator scores 0.0, as scikit-learn."""
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return precision, recall, _ratio(2 * precision * recall, precision + recall)


def logit_bins(logits: np.ndarray) -> np.ndarray:
    """Histogram bin of each logit (clamped to +-LOGIT_LIMIT)."""
    scaled = (np.asarray(logits, dtype=np.float64) + LOGIT_LIMIT) * (HIST_BINS / (2 * LOGIT_LIMIT))
    return np.clip(np.floor(scaled), 0, HIST_BINS - 1).astype(np.int64)


def _edge_logit(edge: int) -> float:
    return -LOGIT_LIMIT + edge * (2 * LOGIT_LIMIT / HIST_BINS)


@dataclass
class ClassCounts:
    """Sufficient statistics of a classification evaluation over a fixed class list."""

    classes: list[str]
    multi_label: bool = False
    tp: np.ndarray = field(default=None)  # type: ignore[assignment]  # (C,)
    fp: np.ndarray = field(default=None)  # type: ignore[assignment]
    fn: np.ndarray = field(default=None)  # type: ignore[assignment]
    n_examples: int = 0
    n_correct: int = 0
    """Single-label: argmax equals the gold class; multi-label: the whole label set is right."""
    pos_hist: np.ndarray | None = None  # (C, HIST_BINS), multi-label only
    neg_hist: np.ndarray | None = None

    def __post_init__(self) -> None:
        c = len(self.classes)
        for name in ("tp", "fp", "fn"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(c, dtype=np.int64))
        if self.multi_label and self.pos_hist is None:
            self.pos_hist = np.zeros((c, HIST_BINS), dtype=np.int64)
            self.neg_hist = np.zeros((c, HIST_BINS), dtype=np.int64)

    # ------------------------------------------------------------------ accumulation
    def update_single(self, gold: np.ndarray, predicted: np.ndarray) -> None:
        """Add single-label results: gold and predicted class indices, shape (N,)."""
        gold, predicted = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
        if gold.shape != predicted.shape:
            raise ValueError(f"{gold.shape[0]} gold labels but {predicted.shape[0]} predictions")
        c = len(self.classes)
        hit = gold == predicted
        self.tp += np.bincount(gold[hit], minlength=c)
        self.fp += np.bincount(predicted[~hit], minlength=c)
        self.fn += np.bincount(gold[~hit], minlength=c)
        self.n_examples += int(gold.shape[0])
        self.n_correct += int(hit.sum())

    def update_multi(self, gold: np.ndarray, logits: np.ndarray, thresholds: np.ndarray) -> None:
        """Add multi-label results: gold indicators and logits (N, C), thresholds (C,) on probabilities."""
        gold = np.asarray(gold, dtype=bool)
        logits = np.asarray(logits, dtype=np.float64)
        if gold.shape != logits.shape:
            raise ValueError(f"gold shape {gold.shape} but scores shape {logits.shape}")
        predicted = 1.0 / (1.0 + np.exp(-logits)) >= np.asarray(thresholds, dtype=np.float64)[None, :]
        self.tp += (gold & predicted).sum(axis=0)
        self.fp += (~gold & predicted).sum(axis=0)
        self.fn += (gold & ~predicted).sum(axis=0)
        self.n_examples += int(gold.shape[0])
        self.n_correct += int((gold == predicted).all(axis=1).sum())
        bins = logit_bins(logits)
        for k in range(len(self.classes)):
            self.pos_hist[k] += np.bincount(bins[gold[:, k], k], minlength=HIST_BINS)
            self.neg_hist[k] += np.bincount(bins[~gold[:, k], k], minlength=HIST_BINS)

    def merge(self, other: ClassCounts) -> ClassCounts:
        """Add ``other`` (same classes) into these counts; returns ``self``."""
        if other.classes != self.classes or other.multi_label != self.multi_label:
            raise ValueError("cannot merge counts over different classes")
        for name in ("tp", "fp", "fn"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.n_examples += other.n_examples
        self.n_correct += other.n_correct
        if self.multi_label:
            self.pos_hist = self.pos_hist + other.pos_hist
            self.neg_hist = self.neg_hist + other.neg_hist
        return self

    def copy(self) -> ClassCounts:
        """An independent copy, so that ``+`` never aliases its operands' arrays."""
        hist = (None, None) if not self.multi_label else (self.pos_hist.copy(), self.neg_hist.copy())
        return ClassCounts(list(self.classes), self.multi_label, self.tp.copy(), self.fp.copy(), self.fn.copy(),
                           self.n_examples, self.n_correct, *hist)

    def __add__(self, other: ClassCounts) -> ClassCounts:
        if not isinstance(other, ClassCounts):
            return NotImplemented
        return self.copy().merge(other)

    # ------------------------------------------------------------------ distributed reduction
    def to_tensor(self, labels: Sequence[str] | None = None) -> torch.Tensor:
        """One float64 vector ``[tp, fp, fn (C each), n_examples, n_correct, histograms]`` to all-reduce(SUM).

        ``labels``, when given (``textorch.train.dist_eval.reduce_counts`` passes them), must be
        these counts' classes in the same order: the layout is fixed by the model's classes.
        """
        if labels is not None and list(labels) != self.classes:
            raise ValueError(f"tensor layout {list(labels)} differs from the counted classes {self.classes}")
        parts = [self.tp, self.fp, self.fn, np.array([self.n_examples, self.n_correct])]
        if self.multi_label:
            parts += [self.pos_hist.ravel(), self.neg_hist.ravel()]
        return torch.from_numpy(np.concatenate(parts).astype(np.float64))

    @classmethod
    def from_tensor(cls, t: torch.Tensor, labels: Sequence[str], multi_label: bool | None = None) -> ClassCounts:
        """Inverse of :meth:`to_tensor`, typically after the all-reduce; the task type follows from the size."""
        c = len(labels)
        sizes = {False: 3 * c + 2, True: 3 * c + 2 + 2 * c * HIST_BINS}
        if multi_label is None:
            multi_label = t.dim() == 1 and t.numel() == sizes[True]
        if t.dim() != 1 or t.numel() != sizes[multi_label]:
            raise ValueError(f"count tensor has shape {tuple(t.shape)}, expected ({sizes[multi_label]},)")
        v = np.rint(t.detach().cpu().double().numpy()).astype(np.int64)
        counts = cls(list(labels), multi_label, v[:c].copy(), v[c : 2 * c].copy(), v[2 * c : 3 * c].copy(),
                     int(v[3 * c]), int(v[3 * c + 1]))
        if multi_label:
            rest = v[3 * c + 2 :]
            counts.pos_hist = rest[: c * HIST_BINS].reshape(c, HIST_BINS).copy()
            counts.neg_hist = rest[c * HIST_BINS :].reshape(c, HIST_BINS).copy()
        return counts

    # ------------------------------------------------------------------ scores
    def roc_auc(self) -> list[float | None]:
        """Per-class ROC-AUC (Mann-Whitney over histogram bins); None where a class has no positive or no negative."""
        if not self.multi_label:
            raise ValueError("ROC-AUC is reported for multi-label tasks")
        values: list[float | None] = []
        for pos, neg in zip(self.pos_hist, self.neg_hist):
            n_pos, n_neg = int(pos.sum()), int(neg.sum())
            if n_pos == 0 or n_neg == 0:
                values.append(None)
                continue
            below = np.concatenate([[0], np.cumsum(neg)[:-1]])
            concordant = float((pos * below).sum()) + 0.5 * float((pos * neg).sum())
            values.append(concordant / (n_pos * n_neg))
        return values

    def tune_thresholds(self) -> np.ndarray:
        """Per class, the grid threshold with the best F1 on these counts (ties: nearest 0.5).

        The candidates are the histogram edges nearest to :data:`THRESHOLD_GRID`, so the counts
        at each candidate are exact. A class without positives keeps 0.5.
        """
        thresholds = np.full(len(self.classes), 0.5)
        for k, (pos, neg) in enumerate(zip(self.pos_hist, self.neg_hist)):
            n_pos = int(pos.sum())
            if n_pos == 0:
                continue
            tp_from, fp_from = np.cumsum(pos[::-1])[::-1], np.cumsum(neg[::-1])[::-1]
            best: tuple[float, float, float] | None = None
            for grid in THRESHOLD_GRID:
                edge = int(round((math.log(grid / (1 - grid)) + LOGIT_LIMIT) * HIST_BINS / (2 * LOGIT_LIMIT)))
                tp, fp = int(tp_from[edge]), int(fp_from[edge])
                f1 = _ratio(2 * tp, 2 * tp + fp + (n_pos - tp))
                key = (f1, -abs(grid - 0.5))
                if best is None or key > best[:2]:
                    best = (*key, 1.0 / (1.0 + math.exp(-_edge_logit(edge))))
            thresholds[k] = best[2]
        return thresholds

    def present(self) -> list[int]:
        """Classes with gold examples or predictions: the rows reported, as scikit-learn does."""
        return [k for k in range(len(self.classes)) if self.tp[k] + self.fp[k] + self.fn[k] > 0]

    def scores(self) -> dict:
        """``accuracy``, ``macro``, ``micro``, ``per_class`` (and ``roc_auc`` for multi-label), all in [0, 1]."""
        rows = self.present()
        per_class = {}
        for k in rows:
            precision, recall, f1 = _prf(self.tp[k], self.fp[k], self.fn[k])
            per_class[self.classes[k]] = {"precision": precision, "recall": recall, "f1": f1,
                                          "support": int(self.tp[k] + self.fn[k])}
        macro = {key: (statistics.fmean(r[key] for r in per_class.values()) if per_class else 0.0)
                 for key in ("precision", "recall", "f1")}
        precision, recall, f1 = _prf(int(self.tp.sum()), int(self.fp.sum()), int(self.fn.sum()))
        result = {
            "accuracy": _ratio(self.n_correct, self.n_examples),
            "macro": macro,
            "micro": {"precision": precision, "recall": recall, "f1": f1},
            "per_class": per_class,
        }
        if self.multi_label:
            defined = [v for v in self.roc_auc() if v is not None]
            result["roc_auc"] = statistics.fmean(defined) if defined else None
        return result


def summarize_folds(fold_scores: list[dict]) -> dict:
    """Mean and standard deviation over folds of accuracy, macro-F1 and micro-F1."""
    summary: dict = {"mean": {}, "sd": {}}
    for name, get in (("accuracy", lambda s: s["accuracy"]), ("macro_f1", lambda s: s["macro"]["f1"]),
                      ("micro_f1", lambda s: s["micro"]["f1"])):
        values = [get(s) for s in fold_scores]
        summary["mean"][name] = statistics.fmean(values)
        summary["sd"][name] = statistics.stdev(values) if len(values) > 1 else 0.0
    return summary


def format_cls_report(scores: dict, digits: int = 4) -> str:
    """A scikit-learn style table: one row per class, then accuracy, macro and micro averages."""
    per_class = scores["per_class"]
    width = max([len("macro avg"), *map(len, per_class)])
    head = f"{'':>{width}s}  {'precision':>9}  {'recall':>9}  {'f1-score':>9}  {'support':>9}"
    row = "{:>{w}s}  {:>9.{d}f}  {:>9.{d}f}  {:>9.{d}f}  {:>9}"
    lines = [head, ""]
    support = 0
    for name, values in per_class.items():
        lines.append(row.format(name, values["precision"], values["recall"], values["f1"], values["support"], w=width, d=digits))
        support += values["support"]
    lines.append("")
    # Multi-label supports count positive labels, not texts: no total is shown beside the (subset) accuracy.
    accuracy_support = "" if "roc_auc" in scores else support
    lines.append(f"{'accuracy':>{width}s}  {'':>9}  {'':>9}  {scores['accuracy']:>9.{digits}f}  {accuracy_support:>9}")
    for name in ("macro", "micro"):
        avg = scores[name]
        lines.append(row.format(f"{name} avg", avg["precision"], avg["recall"], avg["f1"], support, w=width, d=digits))
    if scores.get("roc_auc") is not None:
        lines.append(f"{'roc auc':>{width}s}  {'':>9}  {'':>9}  {scores['roc_auc']:>9.{digits}f}")
    lines.append("")
    return "\n".join(lines)
