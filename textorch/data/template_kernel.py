"""CRF-template rows of a tagging call in one compiled loop (Numba), for a caller that asks.

:meth:`textorch.data.template_features.TemplateFeaturizer.call_rows` in NumPy builds a matrix of
cell values, shifts it once per row offset and gathers each group of templates: a few dozen
array operations whatever the call's size. On a GROBID call (one date, a few names) those
operations' fixed cost is most of the encoding. The loop below does the same arithmetic per
token and template (boundary ids, lookup offsets, the 64-bit keys of the templates searched in
the table, their binary search) with no cost per operation; its rows equal NumPy's (tested).

Only where asked (``compiled=True``): a process that loads a model in PyTorch decodes its CRF
with Numba already, while the torch-free tagger must not pay Numba's load. Where Numba is
missing, fails to compile, or ``TEXTORCH_DISABLE_NUMBA=1`` (the switch of every Numba kernel of
textorch), :func:`rows_kernel` is None and NumPy computes the rows.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from textorch.runtime.numba_kernels import DISABLE_ENV, compile_kernel

logger = logging.getLogger(__name__)

"""Set to 1 and no Numba kernel runs (the NumPy routes give the same results)."""

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # the hashing of template_features._mixed, kept equal (tested)
_SHIFT = np.uint64(31)


def _fill(ids, lengths, first_cell, cell_offset, cell_column, cell_stride, lookup_start, seed,  # noqa: ANN001
          sizes, reach, lookup_rows, table, out):
    """Each token's row of every template into ``out`` ``(tokens, templates)``.

    Plain loops for Numba. ``ids`` ``(column slots, tokens)``: value ids (0: unseen). Template
    ``k`` reads cells ``first_cell[k]:first_cell[k + 1]``; a cell reads its column at the
    token ``cell_offset`` away, or past the sequence's ends the boundary id NumPy's route
    gives (``size - 1 - target`` before the start, ``size + reach + target - length`` after
    the end). A template with ``lookup_start >= 0`` reads ``lookup_rows[lookup_start + sum(id *
    stride)]``; the others hash their ids from ``seed`` and search the sorted ``table``.
    """
    n_templates = len(lookup_start)
    n_keys = len(table)
    begin = 0
    for s in range(len(lengths)):
        length = lengths[s]
        for position in range(length):
            token = begin + position
            for k in range(n_templates):
                at = lookup_start[k]
                key = seed[k]
                unseen = False
                for cell in range(first_cell[k], first_cell[k + 1]):
                    target = position + cell_offset[cell]
                    column = cell_column[cell]
                    if target < 0:
                        value = sizes[column] - 1 - target
                    elif target >= length:
                        value = sizes[column] + reach + target - length
                    else:
                        value = ids[column, begin + target]
                    if at >= 0:
                        at += value * cell_stride[cell]
                    else:
                        unseen = unseen or value == 0
                        key = (key ^ np.uint64(value)) * _MULTIPLIER
                        key = key ^ (key >> _SHIFT)
                if lookup_start[k] >= 0:
                    out[token, k] = lookup_rows[at]
                elif unseen or n_keys == 0:
                    out[token, k] = 0
                else:
                    found = np.searchsorted(table, key)
                    out[token, k] = found + 1 if found < n_keys and table[found] == key else 0
        begin += length


@functools.cache
def rows_kernel() -> Callable | None:
    """:func:`_fill` compiled (or read from Numba's cache) and tried once on a tiny call, so
    that a failure shows here; None: Numba missing, failing, or switched off."""
    return compile_kernel(_fill, _try, "the template rows")


def _try(kernel: Callable) -> None:
    """One tiny call of ``kernel``, so that a failure shows at compile time."""
    TemplateProgram([[(0, 0)]], {0: (0, [1])}, [np.uint64(1)], np.array([2]), 0,
                    np.zeros(2, dtype=np.int32)).rows(kernel, np.ones((1, 1), dtype=np.int64),
                                                      np.ones(1, dtype=np.int64), np.zeros(0, dtype=np.uint64),
                                                      np.int32)


@dataclass(init=False)
class TemplateProgram:
    """A fitted featurizer's templates as :func:`_fill` reads them, made once per table."""

    first_cell: np.ndarray
    cell_offset: np.ndarray
    cell_column: np.ndarray
    cell_stride: np.ndarray
    lookup_start: np.ndarray
    seed: np.ndarray
    sizes: np.ndarray
    reach: int
    lookup_rows: np.ndarray

    def __init__(self, cells: list[list[tuple[int, int]]], lookups: dict[int, tuple[int, list[int]]],
                 seeds: list[np.uint64], sizes: np.ndarray, reach: int, lookup_rows: np.ndarray) -> None:
        """``cells[k]``: template ``k``'s (row offset, column slot) pairs; ``lookups[k]``: where
        its combinations start in ``lookup_rows`` and each cell's stride (templates without one
        are searched); ``sizes``: each column slot's values plus the unseen id."""
        self.first_cell = np.cumsum([0, *map(len, cells)]).astype(np.int64)
        self.cell_offset = np.array([row for mine in cells for row, _ in mine], dtype=np.int64)
        self.cell_column = np.array([slot for mine in cells for _, slot in mine], dtype=np.int64)
        self.cell_stride = np.array([stride for k, mine in enumerate(cells)
                                     for stride in (lookups[k][1] if k in lookups else [0] * len(mine))], dtype=np.int64)
        self.lookup_start = np.array([lookups[k][0] if k in lookups else -1 for k in range(len(cells))], dtype=np.int64)
        self.seed = np.array(seeds, dtype=np.uint64)
        self.sizes = np.ascontiguousarray(sizes, dtype=np.int64)
        self.reach = int(reach)
        self.lookup_rows = np.ascontiguousarray(lookup_rows)

    def rows(self, kernel: Callable, ids: np.ndarray, lengths: np.ndarray, table: np.ndarray,
             dtype: type[np.signedinteger]) -> np.ndarray:
        """``(tokens, templates)`` rows of the sequences of ``lengths`` end to end, whose value
        ids per column slot are ``ids`` ``(slots, tokens)``; ``table``: the fitted keys."""
        out = np.empty((ids.shape[1], len(self.lookup_start)), dtype=dtype)
        kernel(np.ascontiguousarray(ids, dtype=np.int64), np.ascontiguousarray(lengths, dtype=np.int64),
               self.first_cell, self.cell_offset, self.cell_column, self.cell_stride, self.lookup_start, self.seed,
               self.sizes, self.reach, self.lookup_rows, table, out)
        return out
