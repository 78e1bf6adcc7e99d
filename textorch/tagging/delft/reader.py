"""DeLFT's readers of GROBID feature lines, as GROBID calls them, over textorch's own parsing.

Tokens, features and labels come out as DeLFT's do (lists per sequence; labels ``B-<x>``,
``I-<x>``, ``O``), but lines are split and sequences delimited by the rules of
:mod:`textorch.data.readers`, so that the bridge and ``textorch grobid MODEL tag`` read the
same input the same way. Plain lists, not NumPy arrays: GROBID only indexes, slices and hands
them to ``train_test_split``, which takes lists.
"""

from __future__ import annotations

from pathlib import Path

from textorch.data.corpus import Corpus
from textorch.data.readers import (
    is_blank,
    parse_labelled_text,
    read_grobid,
    split_fields,
)
from textorch.errors import DataError

Tokens = list[list[str]]
Features = list[list[list[str]]]


def load_data_crf_string(crf_string: str) -> tuple[Tokens, Features]:
    """Tokens and features (no label) of GROBID feature lines; blank lines end sequences."""
    _require_text(crf_string, "crf_string")
    sentences: Tokens = []
    feature_sets: Features = []
    tokens: list[str] = []
    features: list[list[str]] = []
    for line in crf_string.splitlines():
        if is_blank(line):
            if tokens:
                sentences.append(tokens)
                feature_sets.append(features)
                tokens, features = [], []
            continue
        fields = split_fields(line)
        tokens.append(fields[0])
        features.append(fields[1:])
    if tokens:
        sentences.append(tokens)
        feature_sets.append(features)
    return sentences, feature_sets


def load_data_and_labels_crf_file(filepath: str | Path) -> tuple[Tokens, list[list[str]], Features]:
    """Tokens, labels and features of a labelled GROBID file (``.gz`` too), as DeLFT returns them."""
    if not isinstance(filepath, (str, Path)):
        raise DataError("filepath", None, f"expected a file path (a str or a Path), got {type(filepath).__name__}")
    return _as_lists(read_grobid(filepath))


def load_data_and_labels_crf_string(crf_string: str) -> tuple[Tokens, list[list[str]], Features]:
    """The same from file content in memory (DeLFT offers both)."""
    _require_text(crf_string, "crf_string")
    return _as_lists(parse_labelled_text(crf_string, "<string>", "grobid"))


def _require_text(value: object, name: str) -> None:
    """GROBID feature lines are a str; anything else (None, bytes) is refused naming the argument."""
    if not isinstance(value, str):
        hint = " (decode it first)" if isinstance(value, (bytes, bytearray)) else ""
        raise DataError(name, None, f"expected the GROBID feature lines as a str, got {type(value).__name__}{hint}")


def _as_lists(corpus: Corpus) -> tuple[Tokens, list[list[str]], Features]:
    return ([s.tokens for s in corpus.sequences], [list(s.labels or ()) for s in corpus.sequences],
            [s.features or [[] for _ in s.tokens] for s in corpus.sequences])
