"""Tests for the embedded demo date corpus (textorch.data.demo_corpus)."""

from __future__ import annotations

import re
import statistics
from collections import Counter

import pytest

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.demo_corpus import DEMO_LABELS, generate_date_corpus, sample_texts
from textorch.data.tokenize import tokenize
from textorch.errors import ConfigError

MONTH_PREFIXES = {
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
}


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate_date_corpus(500, seed=0)


def _fields(seq: TokenSequence) -> list[tuple[str, str]]:
    """The (field, text) spans of a sequence, continuation tokens joined without spaces."""
    spans: list[tuple[str, str]] = []
    assert seq.labels is not None
    for token, label in zip(seq.tokens, seq.labels):
        if label.startswith("B-"):
            spans.append((label[3:-1], token))
        elif label.startswith("I-"):
            field, text = spans[-1]
            spans[-1] = (field, text + token)
    return spans


def _shape(seq: TokenSequence) -> str:
    """The date part of a line, digits and words abstracted: ``9 / 9 / 9``, ``A 9 , 9``."""
    assert seq.labels is not None
    marked = [i for i, label in enumerate(seq.labels) if label != "O"]
    pieces = []
    for token in seq.tokens[marked[0] : marked[-1] + 1]:
        if token.isdigit():
            pieces.append("9")
        elif token.isalpha():
            pieces.append("A" if token[0].isupper() else "a")
        elif re.fullmatch(r"\d+[a-z]+", token):
            pieces.append("9a")
        else:
            pieces.append(token)
    return " ".join(pieces)


def test_exact_count_and_container(corpus: Corpus) -> None:
    assert len(corpus) == 500
    assert corpus.format == "text"
    assert len(generate_date_corpus(0)) == 0
    assert len(generate_date_corpus(7, seed=3)) == 7


def test_deterministic_for_a_seed_and_different_across_seeds() -> None:
    a = generate_date_corpus(200, seed=11)
    b = generate_date_corpus(200, seed=11)
    c = generate_date_corpus(200, seed=12)
    assert [(s.text, s.tokens, s.labels, s.offsets) for s in a.sequences] == [
        (s.text, s.tokens, s.labels, s.offsets) for s in b.sequences
    ]
    assert [s.text for s in a.sequences] != [s.text for s in c.sequences]
    # A prefix of a longer corpus is the shorter corpus: n only decides where to stop.
    assert [s.text for s in generate_date_corpus(50, seed=11).sequences] == [
        s.text for s in a.sequences[:50]
    ]


def test_global_random_state_is_not_used() -> None:
    import random

    random.seed(1)
    expected = random.random()
    random.seed(1)
    generate_date_corpus(30, seed=0)
    assert random.random() == expected


def test_offsets_point_into_text_and_match_library_tokenizer(corpus: Corpus) -> None:
    for seq in corpus.sequences:
        assert seq.text is not None and seq.offsets is not None and seq.labels is not None
        assert len(seq.tokens) == len(seq.labels) == len(seq.offsets) > 0
        for token, (begin, end) in zip(seq.tokens, seq.offsets):
            assert seq.text[begin:end] == token
        assert [b for b, _ in seq.offsets] == sorted(b for b, _ in seq.offsets)
        assert tokenize(seq.text) == (seq.tokens, seq.offsets)


def test_labels_are_valid_iob2(corpus: Corpus) -> None:
    for seq in corpus.sequences:
        assert seq.labels is not None
        previous = "O"
        for label in seq.labels:
            assert label in DEMO_LABELS
            if label.startswith("I-"):
                assert previous[2:] == label[2:], (seq.text, seq.labels)
            previous = label


def test_every_label_type_present(corpus: Corpus) -> None:
    counts = Counter(label for seq in corpus.sequences for label in seq.labels or [])
    assert set(counts) == set(DEMO_LABELS)
    # Each field is common enough to learn, continuations included.
    assert counts["B-<day>"] > 300 and counts["B-<month>"] > 300 and counts["B-<year>"] > 400
    assert min(counts["I-<day>"], counts["I-<month>"], counts["I-<year>"]) >= 5


def test_mean_length_in_range(corpus: Corpus) -> None:
    mean = statistics.mean(len(seq) for seq in corpus.sequences)
    assert 5.0 <= mean <= 8.0
    assert max(len(seq) for seq in corpus.sequences) <= 30


def test_field_values_are_real_dates(corpus: Corpus) -> None:
    for seq in corpus.sequences:
        for field, text in _fields(seq):
            if field == "year":
                assert re.fullmatch(r"\d{4}|\d{2}", text), seq.text
                assert len(text) == 2 or 1950 <= int(text) <= 2024
            elif field == "month":
                assert (text.isdigit() and 1 <= int(text) <= 12) or (
                    text[:3].lower() in MONTH_PREFIXES
                ), seq.text
            else:
                assert field == "day"
                match = re.fullmatch(r"(\d{1,2})(st|nd|rd|th)?", text)
                assert match and 1 <= int(match.group(1)) <= 31, seq.text


def test_format_variety(corpus: Corpus) -> None:
    shapes = {_shape(seq) for seq in corpus.sequences}
    assert len(shapes) >= 8
    texts = [seq.text or "" for seq in corpus.sequences]
    patterns = {
        "d month yyyy": r"\b\d{1,2} [A-Z][a-z]+ \d{4}\b",
        "month d, yyyy": r"\b[A-Z][a-z]+ \d{1,2}, \d{4}\b",
        "dd/mm/yyyy": r"\b\d{1,2}/\d{1,2}/\d{4}\b",
        "iso": r"\b\d{4}-\d{2}-\d{2}\b",
        "abbrev dot": r"\b[A-Z][a-z]{2,3}\. \d{4}\b",
        "season": r"\b(Spring|Summer|Autumn|Fall|Winter) \d{4}\b",
        "ordinal of": r"\b\d{1,2}(st|nd|rd|th) of\b",
        "year alone": r"^\d{4}$",
        "lowercase month": r"\b(january|february|march|april|june|july|august|september|"
        r"october|november|december)\b",
        "two dates": r"\d (-|to) \S",
    }
    for name, pattern in patterns.items():
        assert any(re.search(pattern, t) for t in texts), name


def test_slash_dates_are_split_and_slashes_are_other(corpus: Corpus) -> None:
    seen = 0
    for seq in corpus.sequences:
        match = re.search(r"\d+/\d+/\d+", seq.text or "")
        if not match:
            continue
        seen += 1
        inside = [
            (token, label)
            for token, label, (begin, _end) in zip(seq.tokens, seq.labels or [], seq.offsets or [])
            if match.start() <= begin < match.end()
        ]
        assert [token for token, _ in inside][1::2] == ["/", "/"]
        assert [label for _, label in inside][1::2] == ["O", "O"]
        assert sorted(label for _, label in inside[::2]) == ["B-<day>", "B-<month>", "B-<year>"]
    assert seen >= 10


def test_numeric_day_and_month_order_both_occur(corpus: Corpus) -> None:
    """Ambiguous digits are resolved by format: both day-first and month-first are generated."""
    orders: Counter[tuple[str, ...]] = Counter()
    for seq in corpus.sequences:
        digits = [
            label for token, label in zip(seq.tokens, seq.labels or [])
            if token.isdigit() and label in ("B-<day>", "B-<month>")
        ]
        if len(digits) == 2 and "/" in seq.tokens:
            orders[tuple(digits)] += 1
    assert orders[("B-<day>", "B-<month>")] > 0 and orders[("B-<month>", "B-<day>")] > 0


def test_season_and_context_words_are_other(corpus: Corpus) -> None:
    words = {"Spring", "Summer", "Autumn", "Fall", "Winter", "Received", "Published", "©", "of"}
    checked = 0
    for seq in corpus.sequences:
        for token, label in zip(seq.tokens, seq.labels or []):
            if token in words:
                assert label == "O"
                checked += 1
    assert checked > 50


def test_two_date_lines_label_both_dates(corpus: Corpus) -> None:
    pairs = [seq for seq in corpus.sequences if (seq.labels or []).count("B-<year>") == 2]
    assert len(pairs) >= 40
    for seq in pairs:
        years = [i for i, label in enumerate(seq.labels or []) if label == "B-<year>"]
        between = list(zip(seq.tokens, seq.labels or []))[years[0] + 1 : years[1]]
        # Whatever joins the dates ("-", "to", "; accepted") is there and outside any field.
        assert any(t in {"-", "to", "until", ";", ","} and lab == "O" for t, lab in between), (
            seq.text
        )


def test_negative_count_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        generate_date_corpus(-1)
    with pytest.raises(ConfigError):
        sample_texts(-1, seed=0)


def test_sample_texts() -> None:
    texts = sample_texts(40, seed=0)
    assert len(texts) == 40
    assert texts == sample_texts(40, seed=0)
    assert texts != sample_texts(40, seed=1)
    assert all(t and t == t.strip() and re.search(r"\d", t) for t in texts)
    # Fresh lines: not the first lines of the training corpus drawn with the same seed.
    train = {seq.text for seq in generate_date_corpus(40, seed=0).sequences}
    assert len(set(texts) & train) <= 2
    # Two-date lines dominate, as in "Received 3 March 2021; accepted 12/05/2021".
    assert sum(bool(re.search(r"\d.*(;|,| to | - |-).*\d{4}", t)) for t in texts) >= 15
    # No PDF-extraction noise (split years like "19 98") in what the user sees.
    assert not any(re.search(r"\b\d{1,3} (\d{1,3}|st|nd|rd|th)\b", t) for t in texts)
