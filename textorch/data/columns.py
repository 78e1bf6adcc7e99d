"""Feature columns of many sequences at once, read without Python code per token and column.

Encoding turns a call's feature values into ids column by column (the categorical feature
channel, CRF-template features). An encoding call reads every column it needs in one
:func:`read_columns` call and shares the values between the feature channel and the template
features.

Feature rows repeat: a GROBID file holds the same token with the same layout features over and
over (a comma inside a line, a year at a line end). When the rows of a call repeat enough,
:func:`read_columns` keeps each column's values once per distinct row, with each token's
distinct row, so that turning values into ids (a dictionary look-up per value and column, the
bulk of encoding a file) is done once per distinct row; one NumPy gather spreads the ids back
to the tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, count, repeat

import numpy as np

from textorch.data.corpus import TokenSequence

DISTINCT_SHARE = 0.5
"""Distinct rows, as a share of the tokens, above which :func:`read_columns` keeps values per
token: with few repeats, numbering the rows costs more than the look-ups it saves."""

FEWEST_ROWS = 256
"""Rows of a call below which :func:`read_columns` keeps values per token: numbering so few
rows costs NumPy calls (a fixed cost) that a small call's look-ups do not pay back."""

SAMPLE_ROWS = 2048
"""Rows of a large call whose repeats tell :func:`read_columns`, before it numbers them all,
whether numbering them is worth it."""


@dataclass
class ColumnValues:
    """Values of some columns of a call's tokens, sequences end to end (see :func:`read_columns`).

    ``values[column]`` holds one value per distinct row when ``inverse`` is set (token ``i``
    reads row ``inverse[i]``), else one per token."""

    values: dict[int, list[str | None]]
    inverse: np.ndarray | None = None

    def ids(self, column: int, index: dict[str, int], unseen: int) -> np.ndarray:
        """int64 id in ``index`` of ``column``'s value at every token (``unseen``: a value it lacks)."""
        ids = value_ids(self.values[column], index, unseen)
        return ids if self.inverse is None else ids[self.inverse]

    def stacked_ids(self, columns: Sequence[int], indexes: Sequence[dict[str, int]], unseen: int,
                    tokens: int) -> np.ndarray:
        """``(len(columns), tokens)`` int64: :meth:`ids` of each column with its index, stacked
        (spread to the tokens once for all columns where values are kept per distinct row)."""
        if not columns:
            return np.zeros((0, tokens), dtype=np.int64)
        ids = np.stack([value_ids(self.values[column], index, unseen) for column, index in zip(columns, indexes)])
        return ids if self.inverse is None else ids[:, self.inverse]

    def __getitem__(self, column: int) -> list[str | None]:
        """``column``'s value at every token (as :func:`column_values` gives it)."""
        values = self.values[column]
        return values if self.inverse is None else list(map(values.__getitem__, self.inverse.tolist()))


@dataclass
class CallColumns:
    """Sequences as one encoding call reads them (:meth:`SequenceEncoder.encode_call`): every
    token end to end, each sequence's length, the feature columns the encoder reads, and the
    sequences that have no features at all (their feature ids are zeros). Made from sequence
    objects by :func:`call_columns`, or straight from a file's lines
    (:func:`textorch.data.row_chunks.chunk_columns`)."""

    tokens: list[str]
    lengths: np.ndarray
    values: ColumnValues
    without_features: list[int] = field(default_factory=list)


def call_columns(sequences: Sequence[TokenSequence], columns: Sequence[int]) -> CallColumns:
    """The :class:`CallColumns` of ``sequences`` for ``columns`` (see :func:`read_columns`)."""
    return CallColumns(list(chain.from_iterable(sequence.tokens for sequence in sequences)),
                       np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences)),
                       read_columns(sequences, columns),
                       [i for i, sequence in enumerate(sequences) if not sequence.features])


def read_columns(sequences: Sequence[TokenSequence], columns: Sequence[int]) -> ColumnValues:
    """The values of ``columns`` (numbered as :func:`column_values` numbers them) at every token
    of ``sequences``, kept once per distinct row where rows repeat (:data:`DISTINCT_SHARE`)."""
    if not columns:  # a model that reads no feature column: nothing to gather
        return ColumnValues({})
    rows = _uniform_rows(sequences)
    if rows is None:
        return ColumnValues(dict(zip(columns, _columns_by_sequence(sequences, columns))))
    with_token = any(column < 0 for column in columns)
    tokens = _tokens(sequences) if with_token else []

    def keys(end: int | None = None) -> Iterator:  # a token's row, with the token when a column reads it
        return zip(tokens[:end], map(tuple, rows[:end])) if with_token else map(tuple, rows[:end])

    # Not numbered: a small call, or a large one whose first rows hardly repeat.
    numbered = len(rows) >= FEWEST_ROWS and not (
        len(rows) > 2 * SAMPLE_ROWS and len(set(keys(SAMPLE_ROWS))) > DISTINCT_SHARE * SAMPLE_ROWS)
    if numbered:
        # Each token's key, hashed once: the position of the first token with the same row.
        first_of: dict = {}
        first = np.fromiter(map(first_of.setdefault, keys(), count()), dtype=np.int64, count=len(rows))
        numbered = len(first_of) <= DISTINCT_SHARE * len(rows)
    if not numbered:
        return ColumnValues(dict(zip(columns, _columns_of_rows(tokens, rows, columns))))
    firsts = np.flatnonzero(first == np.arange(len(first)))  # each distinct row's first token, in order
    number = np.empty(len(first), dtype=np.int64)
    number[firsts] = np.arange(len(firsts))
    at = firsts.tolist()
    distinct_tokens = list(map(tokens.__getitem__, at)) if with_token else []
    distinct_rows = list(map(rows.__getitem__, at))
    return ColumnValues(dict(zip(columns, _columns_of_rows(distinct_tokens, distinct_rows, columns))), number[first])


def column_values(sequences: Sequence[TokenSequence], columns: Sequence[int]) -> list[list[str | None]]:
    """For each feature column index of ``columns`` (0: the first feature column; -1: the token
    itself), its value at every token, sequences end to end; a column a sequence lacks (or a
    sequence without features) reads as None."""
    rows = _uniform_rows(sequences)
    if rows is not None:
        return _columns_of_rows(_tokens(sequences) if any(c < 0 for c in columns) else [], rows, columns)
    return _columns_by_sequence(sequences, columns)


def _columns_by_sequence(sequences: Sequence[TokenSequence], columns: Sequence[int]) -> list[list[str | None]]:
    """:func:`column_values` where rows differ in width or some sequence has none: sequence by sequence."""
    values: list[list[str | None]] = [[] for _ in columns]
    for sequence in sequences:
        features = sequence.features
        transposed = list(zip(*features)) if features else []
        for out, column in zip(values, columns):
            if column < 0:
                out.extend(sequence.tokens)
            elif column < len(transposed):
                out.extend(transposed[column])
            else:
                out.extend(repeat(None, len(sequence)))
    return values


def _columns_of_rows(tokens: list[str], rows: Sequence[Sequence[str]],
                     columns: Sequence[int]) -> list[list[str | None]]:
    """``columns`` of rows of one width (-1: ``tokens``): one flat list, cut with a stride."""
    width = len(rows[0]) if rows else 0
    flat = list(chain.from_iterable(rows))
    return [list(tokens) if column < 0 else flat[column::width] if column < width else [None] * len(rows)
            for column in columns]


def _tokens(sequences: Sequence[TokenSequence]) -> list[str]:
    return list(chain.from_iterable(sequence.tokens for sequence in sequences))


def _uniform_rows(sequences: Sequence[TokenSequence]) -> list[list[str]] | None:
    """Every token's feature row, sequences end to end, when every token has one and all have
    one width (input to tag always does: the model's); None otherwise (a sequence without
    features, rows of several widths), where the values are gathered sequence by sequence."""
    if not all(sequence.features for sequence in sequences if sequence.tokens):
        return None
    rows = list(chain.from_iterable(sequence.features or () for sequence in sequences))
    if len(rows) != sum(map(len, sequences)) or len(set(map(len, rows))) > 1:
        return None
    return rows


def value_ids(values: list[str | None], index: dict[str, int], unseen: int) -> np.ndarray:
    """int64 ids of ``values`` in ``index``; ``unseen`` for a value it lacks (None included)."""
    return np.fromiter(map(index.get, values, repeat(unseen)), dtype=np.int64, count=len(values))
