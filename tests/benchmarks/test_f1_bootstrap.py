"""The paired bootstrap of F1 differences (benchmarks/peers/f1_bootstrap.py): its interval, its pairing,
its pooling over seeds, and the counts it is given."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.peers import f1_bootstrap


def _counts(rng: np.random.Generator, n: int, hit_rate: float) -> np.ndarray:
    """Per-sequence counts of a system finding each of 1-4 gold entities with ``hit_rate``."""
    gold = rng.integers(1, 5, size=n)
    tp = rng.binomial(gold, hit_rate)
    return np.stack([tp, np.zeros(n, dtype=np.int64), gold - tp], axis=1)


def test_identical_systems_differ_by_exactly_zero():
    counts = _counts(np.random.default_rng(1), 200, 0.8)
    result = f1_bootstrap.paired_bootstrap([counts], [counts.copy()], resamples=500)
    assert (result.diff, result.low, result.high) == (0.0, 0.0, 0.0)
    assert result.within_noise


def test_a_clear_gain_is_detected_and_a_tiny_one_is_within_noise():
    rng = np.random.default_rng(2)
    weak = _counts(rng, 400, 0.6)
    strong = weak.copy()
    strong[:, 0] += strong[:, 2]  # finds every entity the weak one missed
    strong[:, 2] = 0
    result = f1_bootstrap.paired_bootstrap([strong], [weak], resamples=1000)
    assert result.diff > 10 and result.low > 0 and not result.within_noise
    assert result.low <= result.diff <= result.high
    nudged = weak.copy()
    nudged[0] = [nudged[0, 0] + nudged[0, 2], 0, 0]  # one more sequence right: not evidence
    close = f1_bootstrap.paired_bootstrap([nudged], [weak], resamples=1000)
    assert close.within_noise and close.diff > 0


def test_both_systems_are_resampled_with_the_same_sequences():
    rng = np.random.default_rng(3)
    a = _counts(rng, 300, 0.7)
    shuffled = a[rng.permutation(len(a))]
    same_order = f1_bootstrap.paired_bootstrap([a], [a.copy()], resamples=300)
    other_order = f1_bootstrap.paired_bootstrap([a], [shuffled], resamples=300)
    # The same totals either way (point estimate 0); only draws of the same sequences for both
    # make every resampled difference 0, while mismatched pairs move it.
    assert other_order.diff == pytest.approx(0.0) and same_order.high == 0.0
    assert other_order.high - other_order.low > 1.0


def test_seeds_are_drawn_each_within_itself_and_pooled():
    rng = np.random.default_rng(4)
    a = [_counts(rng, 50, 0.9), _counts(rng, 80, 0.5)]
    b = [_counts(rng, 50, 0.8), _counts(rng, 80, 0.5)]
    result = f1_bootstrap.paired_bootstrap(a, b, resamples=200)
    pooled_a, pooled_b = sum(x.sum(axis=0) for x in a), sum(x.sum(axis=0) for x in b)
    assert result.f1_a == pytest.approx(100 * f1_bootstrap.f1(pooled_a))
    assert result.diff == pytest.approx(100 * (f1_bootstrap.f1(pooled_a) - f1_bootstrap.f1(pooled_b)))
    assert result.n_sequences == 130
    again = f1_bootstrap.paired_bootstrap(a, b, resamples=200)
    assert (again.low, again.high) == (result.low, result.high)  # seeded: a results file can be recomputed
    with pytest.raises(ValueError, match="seed 1: 80 sequences counted for one system, 79"):
        f1_bootstrap.paired_bootstrap(a, [b[0], b[1][:79]], resamples=10)
    with pytest.raises(ValueError, match="2 seeds of counts for one system, 1"):
        f1_bootstrap.paired_bootstrap(a, b[:1], resamples=10)
    d = f1_bootstrap.paired_bootstrap(a, b, resamples=200).as_dict()
    assert set(d) >= {"f1_diff", "f1_diff_ci95", "within_noise"} and len(d["f1_diff_ci95"]) == 2


def test_sequence_counts_read_entities_as_seqeval_and_the_gold_digest_ignores_the_scheme():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["I-LOC", "O"]]  # an I- after O opens an entity
    assert f1_bootstrap.sequence_counts(gold, pred).tolist() == [[1, 1, 1], [0, 1, 0]]
    iob1 = [["I-PER", "I-PER", "O", "I-LOC"], ["O", "O"]]
    assert f1_bootstrap.gold_digest(iob1) == f1_bootstrap.gold_digest(gold)
    assert f1_bootstrap.gold_digest(gold[::-1]) != f1_bootstrap.gold_digest(gold)  # order matters: pairing
    assert f1_bootstrap.f1(np.array([0, 0, 0])) == 0.0
    with pytest.raises(ValueError, match="sequence 0: 4 gold labels but 3"):
        f1_bootstrap.sequence_counts(gold[:1], [pred[0][:3]])


def test_a_predicted_padding_label_names_no_entity() -> None:
    """DeLFT's BERT_CRF can predict its '<PAD>' label: the scorer reads it as O, it does not stop."""
    gold = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "O"]]
    pred = [["B-PER", "I-PER", "<PAD>"], ["<PAD>", "O", "O"]]
    assert f1_bootstrap.sequence_counts(gold, pred).tolist() == [[1, 0, 0], [0, 0, 1]]
