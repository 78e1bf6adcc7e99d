"""In-memory representation of labelled and unlabelled token sequences."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenSequence:
    """One sequence to tag: a sentence, a date string, an author block.

    Labels are always held in IOB2 (``B-X``/``I-X``/``O``) whatever the file used, so that
    training, metrics and decoding deal with one scheme only; readers and writers convert.
    """

    tokens: list[str]
    labels: list[str] | None = None
    features: list[list[str]] | None = None
    """Per token, the categorical feature columns (GROBID files); None when there are none."""
    offsets: list[tuple[int, int]] | None = None
    """Per token, ``(begin, end)`` character offsets in ``text`` (end exclusive)."""
    text: str | None = None
    line: int = 0
    """1-based line of the sequence's first token in its source file (0 when not from a file)."""

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Corpus:
    """A file's worth of sequences plus what is needed to write them back in the same style."""

    sequences: list[TokenSequence]
    format: str
    """``conll``, ``grobid`` or ``text``."""
    path: str = "<memory>"
    n_features: int = 0
    """Number of feature columns per token (0 for CoNLL and plain text)."""
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sequences)
