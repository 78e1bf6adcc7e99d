"""The uncertainty of an F1 difference between two taggers: a paired bootstrap over test sequences.

Two systems trained with the same seeds and scored on the same test sequences differ in F1
partly because one is better and partly because the test set is a sample. The paired
bootstrap asks how much the difference would move on other samples of the same kind:
each resample draws test sequences with replacement, *the same draw for both systems*
(pairing: a sentence hard for one is usually hard for the other, which a resample must
keep), recomputes both micro F1 scores from the drawn sequences' entity counts, and keeps
their difference. With several seeds (each its own model pair, and for GROBID its own
test split) every resample draws within each seed and pools the counts over the seeds
before computing F1, as the point estimate does. The 95 % interval is the 2.5th and
97.5th percentiles of the resampled differences; when it spans zero the difference is
within the noise of the test set and of the seeds tried.

Counts come from both systems' predicted labels, scored by one scorer (textorch's
seqeval-compatible entity extraction), so that no difference of scorers enters the
comparison.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 20261202
"""Fixed, so that a results file can be recomputed to the digit."""
CHUNK = 250
"""Resamples drawn at once: the index array of a chunk of CoNLL-2003's 3,453 test sentences
stays a few tens of MB whatever ``RESAMPLES`` is."""


def sequence_counts(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> np.ndarray:
    """``(n, 3)`` int64 array: true positives, false positives, false negatives of each sequence
    (entities of all types together: the micro average), entities read as seqeval reads them.

    A predicted tag that is no label at all (DeLFT's BERT_CRF can predict its padding label
    ``<PAD>``) names no entity: it is read as ``O``, as seqeval reads it, not refused."""
    from textorch.eval.metrics import extract_entities

    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sequences but {len(pred)} predicted")
    counts = np.zeros((len(gold), 3), dtype=np.int64)
    for row, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"sequence {row}: {len(g)} gold labels but {len(p)} predicted")
        truth, guess = set(extract_entities(g)), set(extract_entities(_labels_only(p)))
        counts[row] = len(truth & guess), len(guess - truth), len(truth - guess)
    return counts


def _labels_only(tags: Sequence[str]) -> list[str]:
    """``tags`` with anything that is neither ``O`` nor a prefixed label replaced by ``O``."""
    return [t if t == "O" or (len(t) > 2 and t[1] == "-" and t[0] in "BIES") else "O" for t in tags]


def gold_digest(gold: Sequence[Sequence[str]]) -> str:
    """A fingerprint of the gold entities, sequence by sequence: two systems' counts may be
    paired only when they describe the same sequences in the same order (the same digest),
    whichever label scheme (IOB1, IOB2, GROBID's) each read them in."""
    from textorch.eval.metrics import extract_entities

    digest = hashlib.sha1()
    for labels in gold:
        digest.update(repr((len(labels), sorted(extract_entities(labels)))).encode())
    return digest.hexdigest()


def f1(counts: np.ndarray) -> np.ndarray:
    """Micro F1 of ``(..., 3)`` summed counts, from precision and recall as seqeval computes it
    (an empty denominator scores 0)."""
    counts = np.asarray(counts, dtype=np.float64)
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        return np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)


@dataclass(frozen=True)
class F1Difference:
    """System A's F1 minus system B's, in F1 points (0-100), with its bootstrap interval."""

    f1_a: float
    f1_b: float
    diff: float
    low: float
    high: float
    resamples: int
    n_sequences: int

    @property
    def within_noise(self) -> bool:
        """The 95 % interval spans zero: the data do not tell which system is better."""
        return self.low <= 0.0 <= self.high

    def as_dict(self) -> dict:
        return {"f1_a": self.f1_a, "f1_b": self.f1_b, "f1_diff": self.diff, "f1_diff_ci95": [self.low, self.high],
                "within_noise": self.within_noise, "resamples": self.resamples, "n_sequences": self.n_sequences}


def paired_bootstrap(a: Sequence[np.ndarray], b: Sequence[np.ndarray], resamples: int = RESAMPLES,
                     seed: int = SEED, level: float = 0.95) -> F1Difference:
    """F1(a) - F1(b) with its percentile interval; ``a[k]`` and ``b[k]`` are the per-sequence
    counts (:func:`sequence_counts`) of the two systems for seed ``k``, the same sequences in
    the same order.

    Each resample draws, for every seed, as many sequences as that seed's test set has, with
    replacement; both systems' counts are summed over the same draw, then over the seeds.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"{len(a)} seeds of counts for one system, {len(b)} for the other")
    pairs = []
    for k, (x, y) in enumerate(zip(a, b)):
        x, y = np.asarray(x, dtype=np.int64).reshape(-1, 3), np.asarray(y, dtype=np.int64).reshape(-1, 3)
        if len(x) != len(y) or not len(x):
            raise ValueError(f"seed {k}: {len(x)} sequences counted for one system, {len(y)} for the other")
        pairs.append(np.concatenate([x, y], axis=1))  # (n, 6): one gather serves both systems
    rng = np.random.default_rng(seed)
    diffs = np.empty(resamples, dtype=np.float64)
    for begin in range(0, resamples, CHUNK):
        size = min(CHUNK, resamples - begin)
        pooled = np.zeros((size, 6), dtype=np.int64)
        for both in pairs:
            pooled += both[rng.integers(0, len(both), size=(size, len(both)))].sum(axis=1)
        diffs[begin:begin + size] = f1(pooled[:, :3]) - f1(pooled[:, 3:])
    totals = sum(both.sum(axis=0) for both in pairs)
    f1_a, f1_b = float(f1(totals[:3])), float(f1(totals[3:]))
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(100 * diffs, [tail, 100 - tail])
    return F1Difference(100 * f1_a, 100 * f1_b, 100 * (f1_a - f1_b), float(low), float(high), resamples,
                        sum(len(both) for both in pairs))
