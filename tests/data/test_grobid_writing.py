"""GROBID labels and blocks written from IOB2 tags: what the per-pair label table and the joined
feature rows give equals the token-by-token rule, whatever tags came before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from textorch.data.corpus import TokenSequence
from textorch.data.tags import iob2_to_grobid
from textorch.data.writers import grobid_block

_TAGS = st.lists(st.sampled_from(["O", "B-<x>", "I-<x>", "B-<y>", "I-<y>", "B-PER", "I-PER"]), max_size=20)


def _token_by_token(tags: list[str]) -> list[str]:
    """GROBID's convention, one token at a time: ``I-`` opens a field (or a run of outside
    tokens), the bare label continues it; bare types get brackets."""
    out = []
    for i, tag in enumerate(tags):
        previous = tags[i - 1] if i else None
        if tag == "O":
            out.append("<other>" if previous == "O" else "I-<other>")
            continue
        typ = tag[2:] if tag[2:].startswith("<") else f"<{tag[2:]}>"
        continues = tag[0] == "I" and previous not in (None, "O") and previous[2:] == tag[2:]
        out.append(typ if continues else f"I-{typ}")
    return out


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(_TAGS, max_size=4))
def test_labels_of_successive_calls_follow_the_token_by_token_rule(calls: list[list[str]]) -> None:
    for tags in calls:
        assert iob2_to_grobid(tags) == _token_by_token(tags)


def test_a_sequence_starts_afresh_after_a_call_that_ended_in_the_same_tag() -> None:
    assert iob2_to_grobid(["O", "O"]) == ["I-<other>", "<other>"]
    assert iob2_to_grobid(["O"]) == ["I-<other>"]
    assert iob2_to_grobid(["B-<x>", "I-<x>"]) == ["I-<x>", "<x>"]
    assert iob2_to_grobid(["I-<x>"]) == ["I-<x>"]


def test_a_block_writes_each_token_its_fields_then_its_label() -> None:
    features = [["f1", "g1"], ["f2", "g2"], ["f3", "g3"]]
    block = grobid_block(TokenSequence(["a", "b", "c"], features=features), ["B-<x>", "I-<x>", "O"])
    assert block == "a f1 g1 I-<x>\nb f2 g2 <x>\nc f3 g3 I-<other>\n\n"


def test_a_block_without_features_or_with_empty_rows_has_no_empty_field() -> None:
    tags = ["B-<x>", "O"]
    expected = "a I-<x>\nb I-<other>\n\n"
    assert grobid_block(TokenSequence(["a", "b"]), tags) == expected
    assert grobid_block(TokenSequence(["a", "b"], features=[[], []]), tags) == expected
    assert grobid_block(TokenSequence(["a", "b"], features=[["f"], []]), tags) == "a f I-<x>\nb I-<other>\n\n"
    assert grobid_block(TokenSequence([], features=[]), []) == "\n"


def test_the_kept_pairs_stay_bounded_and_right_when_emptied(monkeypatch) -> None:
    from textorch.data import tags

    monkeypatch.setattr(tags, "GROBID_CACHE_SIZE", 8)
    for k in range(30):
        sequence = ["O", f"B-<f{k}>", f"I-<f{k}>", "O", f"I-<g{k}>"]
        assert iob2_to_grobid(sequence) == _token_by_token(sequence)
        assert iob2_to_grobid(sequence) == _token_by_token(sequence)  # from the kept pairs
        assert len(tags._grobid_of_pair) <= 8 + len(sequence)
