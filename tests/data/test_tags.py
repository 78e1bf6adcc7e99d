"""Tag-scheme conversion: IOB1/IOB2/IOBES to IOB2, GROBID to IOB2 and back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textorch.data.tags import (
    conll_tag_error,
    detect_scheme,
    grobid_label_error,
    grobid_to_iob2,
    iob2_to_grobid,
    iob2_to_iobes,
    is_conll_tag,
    is_grobid_label,
    normalize_to_iob2,
    split_tag,
    validate_label,
)


def test_iob1_conll2003_adjacent_entities() -> None:
    # CoNLL-2003 style: entities open with I-, B- only where an entity directly follows one of
    # the same type ("... Germany 's Kohl ..." style adjacency).
    iob1 = ["I-ORG", "O", "I-MISC", "O", "O", "I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC"]
    expected = ["B-ORG", "O", "B-MISC", "O", "O", "B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]
    assert normalize_to_iob2(iob1) == expected
    assert detect_scheme(iob1) == "iob1"


def test_iob1_type_change_without_o_opens_new_entity() -> None:
    assert normalize_to_iob2(["I-PER", "I-ORG", "I-ORG"]) == ["B-PER", "B-ORG", "I-ORG"]


def test_iob2_is_unchanged_and_idempotent() -> None:
    iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert normalize_to_iob2(iob2) == iob2
    assert normalize_to_iob2(normalize_to_iob2(iob2)) == iob2
    assert detect_scheme(iob2) == "iob2"


def test_iobes_to_iob2() -> None:
    iobes = ["S-PER", "O", "B-ORG", "I-ORG", "E-ORG", "S-LOC", "S-LOC", "B-MISC", "E-MISC"]
    expected = ["B-PER", "O", "B-ORG", "I-ORG", "I-ORG", "B-LOC", "B-LOC", "B-MISC", "I-MISC"]
    assert normalize_to_iob2(iobes) == expected
    assert detect_scheme(iobes) == "iobes"


def test_empty_sequence() -> None:
    assert normalize_to_iob2([]) == []
    assert grobid_to_iob2([]) == []
    assert iob2_to_grobid([]) == []
    assert iob2_to_iobes([]) == []


def test_iob2_to_iobes() -> None:
    iob2 = ["B-PER", "I-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC", "B-ORG"]
    expected = ["B-PER", "I-PER", "E-PER", "S-PER", "O", "B-LOC", "E-LOC", "S-ORG"]
    assert iob2_to_iobes(iob2) == expected


_TYPES = st.sampled_from(["PER", "LOC", "<day>", "<year>"])
_RAW_TAGS = st.one_of(st.just("O"), st.tuples(st.sampled_from("BIES"), _TYPES).map("-".join))
_IOB2 = st.lists(_RAW_TAGS, max_size=30).map(normalize_to_iob2)


@settings(max_examples=300, deadline=None, database=None)
@given(_IOB2)
def test_iobes_round_trip(tags: list[str]) -> None:
    assert normalize_to_iob2(iob2_to_iobes(tags)) == tags


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(_RAW_TAGS, max_size=30))
def test_normalized_output_is_valid_iob2(tags: list[str]) -> None:
    out = normalize_to_iob2(tags)
    assert len(out) == len(tags)
    for i, tag in enumerate(out):
        assert tag == "O" or tag[0] in "BI"
        if tag.startswith("I-"):
            assert i > 0 and out[i - 1] != "O" and out[i - 1][2:] == tag[2:]
        # entity types are never changed, only prefixes
        assert split_tag(tag)[1] == split_tag(tags[i])[1]


def test_conll_tag_validation() -> None:
    for good in ["O", "B-PER", "I-MISC", "E-X", "S-LOC", "I-<x>"]:
        assert conll_tag_error(good) is None
        assert is_conll_tag(good)
    for bad in ["X-PER", "", "B-", "o", "PER", "B_PER", "-PER"]:
        message = conll_tag_error(bad)
        assert message is not None and repr(bad) in message
        assert not is_conll_tag(bad)


def test_grobid_label_validation() -> None:
    for good in ["I-<day>", "<day>", "<other>", "I-<other>", "I-<addrLine>"]:
        assert grobid_label_error(good) is None
        assert is_grobid_label(good)
    for bad in ["B-<day>", "<day", "day", "", "I-day", "I-<>", "<a b>", "O", "I-<<x>>"]:
        message = grobid_label_error(bad)
        assert message is not None and repr(bad) in message
        assert not is_grobid_label(bad)


def test_validate_label_dispatch() -> None:
    assert validate_label("B-PER", "conll") is None
    assert validate_label("B-PER", "grobid") is not None
    assert validate_label("<x>", "grobid") is None
    with pytest.raises(ValueError, match="unknown tag scheme"):
        validate_label("O", "bio")


def test_grobid_to_iob2_date_example() -> None:
    labels = ["I-<day>", "<day>", "I-<other>", "I-<month>", "<other>", "I-<year>", "<year>"]
    expected = ["B-<day>", "I-<day>", "O", "B-<month>", "O", "B-<year>", "I-<year>"]
    assert grobid_to_iob2(labels) == expected


def test_grobid_to_iob2_is_local() -> None:
    # a continuation that does not follow its field just opens one in IOB2 terms
    assert grobid_to_iob2(["<year>", "I-<other>", "<day>"]) == ["I-<year>", "O", "I-<day>"]
    assert normalize_to_iob2(grobid_to_iob2(["<year>"])) == ["B-<year>"]


def test_iob2_to_grobid() -> None:
    tags = ["O", "O", "B-<day>", "I-<day>", "B-<day>", "O", "B-<month>", "I-<year>", "O"]
    expected = ["I-<other>", "<other>", "I-<day>", "<day>", "I-<day>", "I-<other>",
                "I-<month>", "I-<year>", "I-<other>"]
    assert iob2_to_grobid(tags) == expected


def test_iob2_to_grobid_brackets_bare_types() -> None:
    assert iob2_to_grobid(["B-PER", "I-PER", "O"]) == ["I-<PER>", "<PER>", "I-<other>"]


@settings(max_examples=300, deadline=None, database=None)
@given(_IOB2)
def test_iob2_grobid_round_trip(tags: list[str]) -> None:
    bracketed = [t if t == "O" or t[2] == "<" else f"{t[:2]}<{t[2:]}>" for t in tags]
    grobid = iob2_to_grobid(bracketed)
    assert all(is_grobid_label(label) for label in grobid)
    assert grobid_to_iob2(grobid) == bracketed
    # and the GROBID side is canonical, so going round again is the identity
    assert iob2_to_grobid(grobid_to_iob2(grobid)) == grobid


def test_iob2_forbidden_rules_out_only_the_continuations_of_another_field() -> None:
    from textorch.data.tags import iob2_forbidden

    labels = ["B-<a>", "I-<a>", "B-<b>", "I-<b>", "O", "B-<c>"]
    forbidden, at_start = iob2_forbidden(labels)
    allowed = {(p, c) for p in labels for c in labels if not forbidden[labels.index(p)][labels.index(c)]}
    assert {(p, c) for p in labels for c in labels} - allowed == {
        (p, c) for p in labels for c in ("I-<a>", "I-<b>") if p[2:] != c[2:] or p == "O"}
    assert ("B-<a>", "I-<a>") in allowed and ("I-<a>", "I-<a>") in allowed and ("I-<a>", "B-<b>") in allowed
    assert ("O", "I-<b>") not in allowed and ("B-<c>", "I-<a>") not in allowed
    assert at_start == [False, True, False, True, False, False]


def test_valid_iob2_opens_a_field_where_a_continuation_continues_nothing_and_copies_only_those() -> None:
    from textorch.data.corpus import TokenSequence
    from textorch.data.splits import valid_iob2

    broken = TokenSequence(["a", "b", "c", "d"], ["I-<x>", "I-<x>", "O", "I-<y>"])
    fine = TokenSequence(["a", "b"], ["B-<x>", "I-<x>"])
    unlabelled = TokenSequence(["a"])
    repaired, same, none = valid_iob2([broken, fine, unlabelled])
    assert repaired.labels == ["B-<x>", "I-<x>", "O", "B-<y>"] and repaired.tokens == broken.tokens
    assert broken.labels == ["I-<x>", "I-<x>", "O", "I-<y>"]  # the caller's sequence is not changed
    assert same is fine and none is unlabelled
