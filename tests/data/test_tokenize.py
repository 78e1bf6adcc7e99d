"""Tokeniser: DeLFT-like splitting with exact character offsets, on any Unicode input."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textorch.data.tokenize import tokenize


def _check_invariants(text: str) -> list[str]:
    tokens, offsets = tokenize(text)
    assert len(tokens) == len(offsets)
    previous_end = 0
    for token, (begin, end) in zip(tokens, offsets):
        assert text[begin:end] == token
        assert token and begin < end
        assert begin >= previous_end
        assert not any(char.isspace() for char in token)
        assert all(char.isspace() for char in text[previous_end:begin])
        previous_end = end
    assert all(char.isspace() for char in text[previous_end:])
    # nothing but whitespace is dropped
    assert "".join(tokens) == "".join(char for char in text if not char.isspace())
    return tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   \t\n ", []),
        ("President Obama is not speaking anymore from the White House.",
         ["President", "Obama", "is", "not", "speaking", "anymore", "from", "the", "White",
          "House", "."]),
        ("40 percent, at (four) universities!", ["40", "percent", ",", "at", "(", "four", ")",
                                                 "universities", "!"]),
        ("don't", ["don", "'", "t"]),
        ("l’université «Paris»", ["l", "’", "université", "«", "Paris", "»"]),
        ("3.5% $10 €20 a/b c-d", ["3", ".", "5", "%", "$", "10", "€", "20", "a", "/", "b",
                                  "c", "-", "d"]),
        ("...", [".", ".", "."]),
        ("e-mail: a@b.com #tag", ["e", "-", "mail", ":", "a", "@", "b", ".", "com", "#", "tag"]),
        ("x+y=z <a|b> ~^*&", ["x", "+", "y", "=", "z", "<", "a", "|", "b", ">", "~", "^", "*",
                              "&"]),
        ("a_b", ["a", "_", "b"]),
        ("東京大学 2024年", ["東京大学", "2024年"]),
        ("a\u00a0b", ["a", "b"]),
    ],
)
def test_examples(text: str, expected: list[str]) -> None:
    assert _check_invariants(text) == expected


def test_offsets_of_a_sentence() -> None:
    tokens, offsets = tokenize("Hi, Bob.")
    assert tokens == ["Hi", ",", "Bob", "."]
    assert offsets == [(0, 2), (2, 3), (4, 7), (7, 8)]


def test_combining_marks_stay_with_their_letter() -> None:
    decomposed = "e\u0301te\u0301 cafe\u0301"
    assert _check_invariants(decomposed) == ["e\u0301te\u0301", "cafe\u0301"]
    # a mark after whitespace has nothing to join, so it starts a token
    assert _check_invariants("a \u0301b") == ["a", "\u0301b"]


def test_emoji() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    thumbs = "\U0001f44d\U0001f3fd"
    heart = "\u2764\ufe0f"
    assert _check_invariants(f"hi {family}{thumbs} {heart}!") == ["hi", family, thumbs, heart, "!"]


def test_control_characters_are_their_own_tokens() -> None:
    assert _check_invariants("a\x00b\x01") == ["a", "\x00", "b", "\x01"]
    assert _check_invariants("\ud800x") == ["\ud800", "x"]  # lone surrogate: no crash


def test_joiner_before_whitespace_does_not_swallow_it() -> None:
    assert _check_invariants("a\u200d b") == ["a\u200d", "b"]


_TRICKY = st.sampled_from(list(" \t\n\x00\u00a0\u200d\u0301\ufe0f\U0001f3fd\U0001f468.,'-«»’_")
                          + ["\u2028", "\x85", "\ud800"])
_ANY_CHAR = st.one_of(st.characters(blacklist_categories=()), _TRICKY)


@settings(max_examples=500, deadline=None, database=None)
@given(st.text(_ANY_CHAR, max_size=60))
def test_invariants_on_arbitrary_text(text: str) -> None:
    _check_invariants(text)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(st.sampled_from("ab1 .,\u0301\u200d"), max_size=40))
def test_invariants_on_dense_text(text: str) -> None:
    _check_invariants(text)


@pytest.mark.parametrize("unit", ["a", ".", "a.", "\u0301", "\u200d", "a \u200d", "é "])
def test_linear_time_on_long_inputs(unit: str) -> None:
    text = unit * (200_000 // len(unit))
    start = time.perf_counter()
    tokens, _ = tokenize(text)
    assert time.perf_counter() - start < 2.0
    assert "".join(tokens) == text.replace(" ", "")
