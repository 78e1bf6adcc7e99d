"""A line built from labelled pieces, tokenised as tagging tokenises it, labelled from spans.

A generator (``textorch demo``'s dates) writes a line as segments: a piece of text, its field or
None, and what separates it from the previous piece. Each token takes the label of the segment
its first character lies in, ``B-`` for a field segment's first token and ``I-`` for the
others. Labelling from character spans rather than from the generator's own token list keeps
the labels right whatever the tokeniser does with ``12th`` or ``Jun.``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol

from textorch.data.corpus import TokenSequence
from textorch.data.tokenize import tokenize


class Segment(Protocol):
    text: str
    field: str | None
    sep: str


def labelled_sequence(segments: Sequence[Segment]) -> TokenSequence:
    """The joined line, its tokens with offsets and their IOB2 labels (``B-<field>``, ``O``...)."""
    text, starts, fields = render(segments)
    tokens, offsets = tokenize(text)
    labels: list[str] = []
    previous = -1
    for begin, _end in offsets:
        index = bisect.bisect_right(starts, begin) - 1
        field = fields[index]
        labels.append("O" if field is None else f"{'I' if index == previous else 'B'}-<{field}>")
        previous = index
    return TokenSequence(tokens=tokens, labels=labels, offsets=offsets, text=text)


def render(segments: Sequence[Segment]) -> tuple[str, list[int], list[str | None]]:
    """The joined text, each segment's start offset and field."""
    text = ""
    starts: list[int] = []
    fields: list[str | None] = []
    for i, segment in enumerate(segments):
        if i:
            text += segment.sep
        starts.append(len(text))
        fields.append(segment.field)
        text += segment.text
    return text, starts, fields
