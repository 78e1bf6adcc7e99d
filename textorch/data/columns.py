"""Feature columns of many sequences at once, read without Python code per token and column.

Encoding turns a call's feature values into ids column by column (the categorical feature
channel, CRF-template features); each sequence's rows are transposed once here, so the work per
token is done by C loops (``zip``, ``list.extend``, ``map``) rather than by a Python loop. An encoding call reads
every column it needs in one :func:`column_values` call and shares the values between the
feature channel and the template features.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import numpy as np

from textorch.data.corpus import TokenSequence


def column_values(sequences: Sequence[TokenSequence], columns: Sequence[int]) -> list[list[str | None]]:
    """For each feature column index of ``columns`` (0: the first feature column; -1: the token
    itself), its value at every token, sequences end to end; a column a sequence lacks (or a
    sequence without features) reads as None."""
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


def value_ids(values: list[str | None], index: dict[str, int], unseen: int) -> np.ndarray:
    """int64 ids of ``values`` in ``index``; ``unseen`` for a value it lacks (None included)."""
    return np.fromiter(map(index.get, values, repeat(unseen)), dtype=np.int64, count=len(values))
