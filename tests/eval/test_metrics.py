"""Entity-level metrics checked against seqeval on random, mostly invalid, tag sequences.

seqeval's default mode is the reference: random tags from {O, B-X, I-X} (and E-/S- for
good measure) produce every invalid transition a badly trained model can emit, so equality
on thousands of random sequences leaves little room for a misread transition.
"""

from __future__ import annotations

import random
import warnings

import pytest
import torch

seqeval_metrics = pytest.importorskip("seqeval.metrics")
seqeval_sequence_labeling = pytest.importorskip("seqeval.metrics.sequence_labeling")

from textorch.eval.metrics import (  # noqa: E402
    EntityCounts,
    entity_labels,
    evaluate_sequences,
    extract_entities,
    split_tag,
)
from textorch.eval.entity_report import format_report  # noqa: E402

TOL = 1e-9
LABELS = ["PER", "LOC", "<day>", "<month>", "sub-title"]
IOB2_TAGS = ["O"] + [f"{p}-{label}" for label in LABELS for p in "BI"]
IOBES_TAGS = IOB2_TAGS + [f"{p}-{label}" for label in LABELS[:2] for p in "ES"]


def _random_corpus(rng: random.Random, tags: list[str], n: int, max_len: int = 12):
    """Gold and predictions of equal shapes; predictions copy gold often so some entities match."""
    gold, pred = [], []
    for _ in range(n):
        length = rng.randint(0, max_len)
        g = [rng.choice(tags) for _ in range(length)]
        p = [t if rng.random() < 0.6 else rng.choice(tags) for t in g]
        gold.append(g)
        pred.append(p)
    return gold, pred


def _seqeval_dict(gold: list[list[str]], pred: list[list[str]]) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return seqeval_metrics.classification_report(gold, pred, output_dict=True)


def _seqeval_micro(gold: list[list[str]], pred: list[list[str]]) -> tuple[float, float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (
            seqeval_metrics.precision_score(gold, pred),
            seqeval_metrics.recall_score(gold, pred),
            seqeval_metrics.f1_score(gold, pred),
        )


def _assert_matches_seqeval(gold: list[list[str]], pred: list[list[str]]) -> dict:
    ours = evaluate_sequences(gold, pred)
    precision, recall, f1 = _seqeval_micro(gold, pred)
    assert ours["precision"] == pytest.approx(precision, abs=TOL)
    assert ours["recall"] == pytest.approx(recall, abs=TOL)
    assert ours["f1"] == pytest.approx(f1, abs=TOL)
    if not ours["per_label"]:
        return ours
    ref = _seqeval_dict(gold, pred)
    ref_labels = sorted(k for k in ref if not k.endswith(" avg"))
    assert list(ours["per_label"]) == ref_labels
    for label, row in ours["per_label"].items():
        assert row["precision"] == pytest.approx(ref[label]["precision"], abs=TOL)
        assert row["recall"] == pytest.approx(ref[label]["recall"], abs=TOL)
        assert row["f1"] == pytest.approx(ref[label]["f1-score"], abs=TOL)
        assert row["support"] == ref[label]["support"]
    assert ours["f1"] == pytest.approx(ref["micro avg"]["f1-score"], abs=TOL)
    return ours


# --- span extraction -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
        (["O", "I-PER", "I-PER"], [("PER", 1, 3)]),  # I after O opens an entity
        (["B-PER", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 2)]),  # label change splits
        (["B-PER", "B-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
        (["I-PER", "B-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
        (["B-<day>", "I-<day>"], [("<day>", 0, 2)]),
        (["B-sub-title", "I-sub-title"], [("sub-title", 0, 2)]),
        (["O", "O", "B-PER"], [("PER", 2, 3)]),  # entity at the end
        (["B-PER", "E-PER", "I-PER"], [("PER", 0, 2), ("PER", 2, 3)]),
        (["S-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
        ([], []),
        (["O", "O"], []),
    ],
)
def test_extract_entities(tags: list[str], expected: list[tuple[str, int, int]]) -> None:
    assert extract_entities(tags) == expected


@pytest.mark.parametrize("tag", ["PER", "B", "B-", "X-PER", "b-PER", "", "O-PER"])
def test_malformed_tags_are_refused(tag: str) -> None:
    with pytest.raises(ValueError, match="neither 'O'"):
        split_tag(tag)


def test_entity_labels_from_vocabulary() -> None:
    assert entity_labels(["O", "B-PER", "I-PER", "I-<day>", "B-sub-title"]) == [
        "<day>",
        "PER",
        "sub-title",
    ]


# --- equality with seqeval -------------------------------------------------------------


@pytest.mark.parametrize("tags", [IOB2_TAGS, IOBES_TAGS], ids=["iob2", "iobes"])
def test_random_corpora_match_seqeval(tags: list[str]) -> None:
    rng = random.Random(1234)
    for _ in range(80):
        gold, pred = _random_corpus(rng, tags, n=rng.randint(1, 30))
        _assert_matches_seqeval(gold, pred)


def test_extraction_matches_seqeval_get_entities() -> None:
    """Sequence by sequence, every short random sequence yields seqeval's chunks."""
    rng = random.Random(5)
    for _ in range(3000):
        tags = [rng.choice(IOBES_TAGS) for _ in range(rng.randint(0, 8))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = seqeval_sequence_labeling.get_entities(tags)
        assert extract_entities(tags) == [(label, s, e + 1) for label, s, e in ref], tags


def test_known_numbers() -> None:
    gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    pred = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    scores = _assert_matches_seqeval(gold, pred)
    assert scores["f1"] == 0.5 and scores["precision"] == 0.5 and scores["recall"] == 0.5
    assert scores["per_label"]["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert scores["per_label"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}
    assert scores["n_sequences"] == 2 and scores["n_tokens"] == 10
    assert set(scores) == {"f1", "precision", "recall", "per_label", "n_sequences", "n_tokens"}


# --- edge cases ------------------------------------------------------------------------


def test_no_entities_anywhere() -> None:
    scores = _assert_matches_seqeval([["O", "O"], []], [["O", "O"], []])
    assert scores["f1"] == 0.0 and scores["per_label"] == {}
    assert scores["n_tokens"] == 2


def test_empty_predictions_score_zero_with_full_support() -> None:
    gold = [["B-PER", "I-PER", "O", "B-<day>"]]
    pred = [["O", "O", "O", "O"]]
    scores = _assert_matches_seqeval(gold, pred)
    assert scores["precision"] == 0.0 and scores["recall"] == 0.0 and scores["f1"] == 0.0
    assert scores["per_label"]["PER"]["support"] == 1
    assert scores["per_label"]["<day>"]["support"] == 1


def test_predicted_label_absent_from_gold_has_zero_support() -> None:
    scores = _assert_matches_seqeval([["B-PER", "O"]], [["B-PER", "B-LOC"]])
    assert scores["per_label"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert scores["precision"] == 0.5 and scores["recall"] == 1.0
    assert scores["f1"] == pytest.approx(2 / 3, abs=TOL)


def test_single_token_entities_and_entity_at_end() -> None:
    gold = [["B-<day>", "O", "B-<month>"], ["O", "B-PER"]]
    pred = [["B-<day>", "O", "I-<month>"], ["O", "I-PER"]]
    scores = _assert_matches_seqeval(gold, pred)
    assert scores["f1"] == 1.0  # I- after O opens the same single-token entities


def test_entities_do_not_cross_sequence_boundaries() -> None:
    gold = [["O", "B-PER"], ["I-PER", "O"]]
    counts = EntityCounts()
    counts.update(gold, gold)
    assert counts.tp == {"PER": 2}
    _assert_matches_seqeval(gold, [["O", "B-PER"], ["O", "O"]])


def test_length_mismatch_raises_and_leaves_counts_untouched() -> None:
    counts = EntityCounts()
    counts.update([["B-PER"]], [["B-PER"]])
    before = counts.copy()
    with pytest.raises(ValueError, match="sequence 1"):
        counts.update([["O"], ["B-PER", "O"]], [["O"], ["B-PER"]])
    with pytest.raises(ValueError, match="2 gold sequences"):
        counts.update([["O"], ["O"]], [["O"]])
    assert counts == before


# --- merging and tensors ---------------------------------------------------------------


def test_merge_of_halves_equals_whole() -> None:
    rng = random.Random(7)
    gold, pred = _random_corpus(rng, IOB2_TAGS, n=60)
    whole = EntityCounts()
    whole.update(gold, pred)
    first, second = EntityCounts(), EntityCounts()
    first.update(gold[:25], pred[:25])
    second.update(gold[25:], pred[25:])
    assert first + second == whole
    assert sum([first, second]) == whole
    assert first.copy().merge(second) == whole
    assert (first + second).scores() == whole.scores()
    assert whole.n_sequences == 60 and whole.n_tokens == sum(map(len, gold))
    # + does not alias its operands
    merged = first + second
    merged.tp["PER"] = merged.tp.get("PER", 0) + 100
    assert first.tp.get("PER", 0) + second.tp.get("PER", 0) == whole.tp.get("PER", 0)


def test_tensor_round_trip_and_layout() -> None:
    counts = EntityCounts()
    counts.update([["B-PER", "I-PER", "B-<day>", "O"]], [["B-PER", "O", "B-<day>", "B-LOC"]])
    labels = ["<day>", "LOC", "PER", "unseen"]
    t = counts.to_tensor(labels)
    assert t.dtype == torch.float64
    expected = [1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 1, 4]
    assert t.tolist() == expected
    assert EntityCounts.from_tensor(t, labels) == counts


def test_summed_tensors_equal_counts_on_whole() -> None:
    """What one all-reduce over processes does: F1 from summed counts, not averaged F1."""
    rng = random.Random(99)
    gold, pred = _random_corpus(rng, IOB2_TAGS, n=50)
    labels = entity_labels(IOB2_TAGS)
    shards = [(gold[i::3], pred[i::3]) for i in range(3)]
    total = torch.zeros(3 * len(labels) + 2, dtype=torch.float64)
    for g, p in shards:
        part = EntityCounts()
        part.update(g, p)
        total += part.to_tensor(labels)
    reduced = EntityCounts.from_tensor(total, labels)
    whole = EntityCounts()
    whole.update(gold, pred)
    assert reduced == whole
    assert reduced.scores()["f1"] == pytest.approx(_seqeval_micro(gold, pred)[2], abs=TOL)


def test_to_tensor_refuses_incomplete_layout_and_bad_shapes() -> None:
    counts = EntityCounts()
    counts.update([["B-PER", "B-LOC"]], [["O", "O"]])
    with pytest.raises(ValueError, match="LOC"):
        counts.to_tensor(["PER"])
    with pytest.raises(ValueError, match="expected"):
        EntityCounts.from_tensor(torch.zeros(4, dtype=torch.float64), ["PER"])


# --- report ----------------------------------------------------------------------------


def test_report_rows_and_numbers() -> None:
    gold = [["B-PER", "I-PER", "O", "B-<day>"], ["B-LOC", "O"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["B-LOC", "B-PER"]]
    scores = evaluate_sequences(gold, pred)
    text = format_report(scores, digits=4)
    lines = text.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1-score", "support"]
    rows = {line[:-40].strip(): line[-40:].split() for line in lines[2:] if line}
    assert list(rows)[:3] == ["<day>", "LOC", "PER"]
    assert rows["PER"] == ["0.5000", "1.0000", "0.6667", "1"]
    micro = rows["micro avg"]
    assert micro == [f"{scores[k]:.4f}" for k in ("precision", "recall", "f1")] + ["3"]
    assert rows["macro avg"][:3] == ["0.5000", "0.6667", "0.5556"]
    widths = {len(line) for line in lines if line}
    assert len(widths) == 1  # aligned columns


@pytest.mark.parametrize("digits", [2, 4])
def test_report_is_identical_to_seqeval(digits: int) -> None:
    rng = random.Random(digits)
    for _ in range(5):
        gold, pred = _random_corpus(rng, IOB2_TAGS, n=20)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = seqeval_metrics.classification_report(gold, pred, digits=digits)
        assert format_report(evaluate_sequences(gold, pred), digits=digits) == expected


def test_report_without_entities() -> None:
    text = format_report(evaluate_sequences([["O"]], [["O"]]))
    assert "micro avg" in text and "0.0000" in text
