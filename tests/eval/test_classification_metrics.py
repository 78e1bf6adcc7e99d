"""Classification counts and scores against scikit-learn, and their mergeability."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, precision_recall_fscore_support, roc_auc_score

from textorch.eval.cls_metrics import ClassCounts, format_cls_report, summarize_folds

CLASSES = ["a", "b", "c", "d"]


def _single(gold: np.ndarray, pred: np.ndarray) -> ClassCounts:
    counts = ClassCounts(CLASSES)
    counts.update_single(gold, pred)
    return counts


def test_single_label_scores_equal_scikit_learn() -> None:
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 3, 200)  # class d never occurs in gold...
    pred = np.where(rng.random(200) < 0.6, gold, rng.integers(0, 4, 200))  # ...but is sometimes predicted
    scores = _single(gold, pred).scores()
    present = sorted(set(gold) | set(pred))
    p, r, f, s = precision_recall_fscore_support(gold, pred, labels=present, zero_division=0)
    assert list(scores["per_class"]) == [CLASSES[k] for k in present]
    for k, name in enumerate(CLASSES[i] for i in present):
        row = scores["per_class"][name]
        assert row["precision"] == pytest.approx(p[k]) and row["recall"] == pytest.approx(r[k])
        assert row["f1"] == pytest.approx(f[k]) and row["support"] == s[k]
    for average in ("macro", "micro"):
        p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=present, average=average, zero_division=0)
        assert (scores[average]["precision"], scores[average]["recall"], scores[average]["f1"]) == pytest.approx((p, r, f))
    assert scores["accuracy"] == pytest.approx(accuracy_score(gold, pred))
    assert scores["per_class"]["d"]["support"] == 0 and scores["per_class"]["d"]["precision"] == 0.0
    assert "roc_auc" not in scores


def test_counts_merge_and_tensor_round_trip_equal_one_pass() -> None:
    rng = np.random.default_rng(1)
    gold, pred = rng.integers(0, 4, 90), rng.integers(0, 4, 90)
    whole = _single(gold, pred)
    halves = _single(gold[:40], pred[:40]) + _single(gold[40:], pred[40:])
    assert halves.scores() == whole.scores()
    summed = _single(gold[:40], pred[:40]).to_tensor(CLASSES) + _single(gold[40:], pred[40:]).to_tensor(CLASSES)  # an all-reduce
    assert ClassCounts.from_tensor(summed, CLASSES).scores() == whole.scores()
    with pytest.raises(ValueError, match="layout"):
        whole.to_tensor(["a", "b"])


def test_multi_label_scores_auc_and_reduction() -> None:
    rng = np.random.default_rng(2)
    gold = rng.random((300, 3)) < [0.5, 0.2, 0.05]
    logits = rng.normal(size=(300, 3)) + 1.5 * gold  # informative, overlapping scores
    thresholds = np.array([0.5, 0.4, 0.7])
    counts = ClassCounts(["x", "y", "z"], multi_label=True)
    counts.update_multi(gold[:100], logits[:100], thresholds)
    part = ClassCounts(["x", "y", "z"], multi_label=True)
    part.update_multi(gold[100:], logits[100:], thresholds)
    reduced = ClassCounts.from_tensor(counts.to_tensor() + part.to_tensor(), ["x", "y", "z"])  # multi-label inferred from size
    assert reduced.multi_label
    scores = reduced.scores()
    pred = 1 / (1 + np.exp(-logits)) >= thresholds
    p, r, f, s = precision_recall_fscore_support(gold, pred, zero_division=0)
    assert [scores["per_class"][c]["f1"] for c in "xyz"] == pytest.approx(f.tolist())
    assert [scores["per_class"][c]["support"] for c in "xyz"] == s.tolist()
    _, _, micro_f1, _ = precision_recall_fscore_support(gold, pred, average="micro", zero_division=0)
    assert scores["micro"]["f1"] == pytest.approx(micro_f1)
    assert scores["accuracy"] == pytest.approx(accuracy_score(gold, pred))  # subset accuracy
    exact = [roc_auc_score(gold[:, k], logits[:, k]) for k in range(3)]
    # Histogram bins are 1/64 logit wide: a tie inside a bin moves the AUC by very little.
    assert reduced.roc_auc() == pytest.approx(exact, abs=0.005)
    assert scores["roc_auc"] == pytest.approx(np.mean(exact), abs=0.005)


def test_roc_auc_undefined_without_negatives() -> None:
    counts = ClassCounts(["x", "y"], multi_label=True)
    counts.update_multi(np.array([[1, 0], [1, 1]], dtype=bool), np.array([[2.0, -1.0], [1.0, 0.5]]), np.full(2, 0.5))
    assert counts.roc_auc() == [None, 1.0]
    assert counts.scores()["roc_auc"] == 1.0


def test_tuned_thresholds_maximise_f1_on_the_grid() -> None:
    # Positives score 0.3 to 0.4, negatives 0.05 to 0.2: a 0.5 threshold finds none of them.
    positive = np.log(np.array([0.3, 0.35, 0.4]) / (1 - np.array([0.3, 0.35, 0.4])))
    negative = np.log(np.array([0.05, 0.1, 0.2]) / (1 - np.array([0.05, 0.1, 0.2])))
    counts = ClassCounts(["x", "never"], multi_label=True)
    logits = np.stack([np.concatenate([positive, negative]), np.full(6, -3.0)], axis=1)
    gold = np.stack([np.arange(6) < 3, np.zeros(6, dtype=bool)], axis=1)
    counts.update_multi(gold, logits, np.full(2, 0.5))
    assert counts.scores()["per_class"]["x"]["f1"] == 0.0
    tuned = counts.tune_thresholds()
    assert 0.2 < tuned[0] <= 0.3 and tuned[1] == 0.5  # a class without positives keeps 0.5
    again = ClassCounts(["x", "never"], multi_label=True)
    again.update_multi(gold, logits, tuned)
    assert again.scores()["per_class"]["x"]["f1"] == 1.0


def test_report_and_fold_summary() -> None:
    scores = _single(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2])).scores()
    text = format_cls_report(scores)
    assert "macro avg" in text and "micro avg" in text and "accuracy" in text
    assert "0.7500" in text  # accuracy 3/4
    summary = summarize_folds([scores, _single(np.array([0, 1]), np.array([0, 1])).scores()])
    assert summary["mean"]["accuracy"] == pytest.approx(0.875)
    assert summary["sd"]["accuracy"] == pytest.approx(np.std([0.75, 1.0], ddof=1))
