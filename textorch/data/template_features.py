"""Sparse CRF-style features of token sequences: CRF++ templates turned into table rows.

A CRF such as GROBID's Wapiti scores each label with one weight per (template, observed value)
pair seen in training. :class:`TemplateFeaturizer` gives every token, for each unigram template,
the row of that pair in a table fitted on the training data (row 0: a pair never seen in
training, which has no weight, exactly as a CRF gives none). A network adds the weights of those
rows to its emissions (:class:`textorch.models.template_emissions.TemplateEmissions`).

Values become integers once per column (a vocabulary per column the templates read), and each
template's value combination becomes a 64-bit key computed with NumPy over the whole call: no
per-token, per-template string is ever built. The fitted table is the sorted array of the keys
seen in training; a row is a key's position in it. For templates with few value combinations
(one narrow column, or a pair of them) the rows of every combination are computed once (a lookup
array), so tagging gathers them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from textorch.data.columns import ColumnValues, column_values, read_columns
from textorch.data.corpus import TokenSequence
from textorch.data.crf_template import FeatureTemplate, parse_template, template_text

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant of multiplicative hashing
LOOKUP_LIMIT = 1 << 16
"""Templates with at most this many value combinations get a lookup array of their rows (built
once per model); the others search the table for each token's key."""


def _mixed(key: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``key`` combined with ``values`` (both uint64 arrays), wrapping modulo 2**64."""
    key = (key ^ values) * _MULTIPLIER
    return key ^ (key >> np.uint64(31))


class TemplateFeaturizer:
    """Per-column vocabularies, the templates, and the table of (template, values) keys."""

    def __init__(self, templates: list[FeatureTemplate], vocabularies: dict[int, dict[str, int]],
                 table: np.ndarray | None = None) -> None:
        self.templates = templates
        self.vocabularies = vocabularies
        """Column -> value -> id (1-based; 0: a value never seen in training)."""
        self.reach = max(abs(row) for template in templates for row, _ in template.cells)
        """The furthest row offset: boundary values come in that many distances per side."""
        self.table = np.zeros(0, dtype=np.uint64)
        self._lookups: dict[int, tuple[list[int], np.ndarray]] = {}
        """Template -> (value count of each cell, row of every value combination, row-major)."""
        if table is not None:
            self.use_table(table)

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(cls, sequences: Sequence[TokenSequence], templates: list[FeatureTemplate]) -> "TemplateFeaturizer":
        """Vocabularies of the columns the templates read, then the keys seen in ``sequences``."""
        columns = sorted({c for t in templates for c in t.columns})
        vocabularies: dict[int, dict[str, int]] = {}
        for column, values in zip(columns, _column_values(sequences, columns)):
            vocabulary = dict.fromkeys(values)
            vocabulary.pop(None, None)
            vocabularies[column] = {value: i for i, value in enumerate(vocabulary, start=1)}
        featurizer = cls(templates, vocabularies)
        ids, position, length = featurizer._positions(sequences)
        keys = [featurizer._keys(k, [featurizer._cell_values(ids[column], position, length, row, column)
                                     for row, column in template.cells])
                for k, template in enumerate(templates)]
        seen = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.uint64)
        featurizer.use_table(seen[seen != 0])
        return featurizer

    def use_table(self, table: np.ndarray) -> None:
        """Take the sorted keys of a fitted (or saved) model; rebuild the lookups of the templates
        whose value combinations are few (:data:`LOOKUP_LIMIT`)."""
        self.table = np.ascontiguousarray(table, dtype=np.uint64)
        self._lookups = {}
        for k, template in enumerate(self.templates):
            counts = [self._value_count(column) for _, column in template.cells]
            if int(np.prod(counts)) > LOOKUP_LIMIT:
                continue
            combos = np.indices(counts).reshape(len(counts), -1)  # every value combination, row-major
            key = np.full(combos.shape[1], self._seed(k), dtype=np.uint64)
            for values in combos:
                key = _mixed(key, values.astype(np.uint64))
            key[(combos == 0).any(axis=0)] = 0
            self._lookups[k] = (counts, self._rows_of(key))

    @property
    def n_rows(self) -> int:
        """Rows of the weight table: one per fitted key, plus row 0 (no feature)."""
        return len(self.table) + 1

    # ------------------------------------------------------------------ encoding
    @property
    def feature_columns(self) -> list[int]:
        """The columns the templates read, numbered as :func:`column_values` numbers them (-1:
        the token, ``k``: the ``k``-th feature column after it)."""
        return [column - 1 for column in self.vocabularies]

    def call_rows(self, sequences: Sequence[TokenSequence], values: ColumnValues | None = None,
                  lengths: np.ndarray | None = None) -> np.ndarray:
        """The ``(tokens, templates)`` int64 rows of the weight table of all ``sequences`` end to
        end. ``values``: :attr:`feature_columns` as :func:`read_columns` reads them, when the
        caller read them already for other features."""
        ids, position, length = self._positions(sequences, values, lengths)
        out = np.zeros((len(position), len(self.templates)), dtype=np.int64)
        cells: dict[tuple[int, int], np.ndarray] = {}  # templates share cells: each is read once
        for k, template in enumerate(self.templates):
            for row, column in template.cells:
                if (row, column) not in cells:
                    cells[row, column] = self._cell_values(ids[column], position, length, row, column)
            cell_values = [cells[cell] for cell in template.cells]
            lookup = self._lookups.get(k)
            if lookup is not None:
                counts, rows = lookup
                flat = cell_values[0]
                for count, more in zip(counts[1:], cell_values[1:]):
                    flat = flat * count + more
                out[:, k] = rows[flat]
            else:
                out[:, k] = self._rows_of(self._keys(k, cell_values))
        return out

    def _positions(self, sequences: Sequence[TokenSequence], values: ColumnValues | None = None,
                   lengths: np.ndarray | None = None) -> tuple[dict[int, np.ndarray], np.ndarray, np.ndarray]:
        """Value ids of every token (all sequences end to end) per column, each token's position
        in its sequence and that sequence's length."""
        if lengths is None:
            lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        position = np.arange(int(lengths.sum()), dtype=np.int64) - starts
        columns = list(self.vocabularies)
        if values is None:
            values = read_columns(sequences, self.feature_columns)
        ids = {column: values.ids(column - 1, self.vocabularies[column], 0) for column in columns}
        return ids, position, np.repeat(lengths, lengths)

    def _cell_values(self, ids: np.ndarray, position: np.ndarray, length: np.ndarray, row: int,
                     column: int) -> np.ndarray:
        """The value id each token reads at ``row`` positions away; past an end, a boundary id
        (after the column's values) that tells the side and the distance."""
        if row == 0:
            return ids
        target = position + row
        size = len(self.vocabularies[column]) + 1
        if row < 0:
            inside = target >= 0
            boundary = size - 1 - target  # distance 1..reach before the start
        else:
            inside = target < length
            boundary = size + self.reach + (target - length)  # distance 1..reach after the end
        shifted = np.roll(ids, -row)  # token i reads token i + row where that is in its sequence
        return np.where(inside, shifted, boundary)

    def _keys(self, k: int, values: list[np.ndarray]) -> np.ndarray:
        """Template ``k``'s key for every token from the value ids its cells read; 0 where a cell
        reads a value unseen in training."""
        key = np.full(len(values[0]), self._seed(k), dtype=np.uint64)
        unseen = np.zeros(len(values[0]), dtype=bool)
        for cell_values in values:
            unseen |= cell_values == 0
            key = _mixed(key, cell_values.astype(np.uint64))
        key[unseen] = 0
        return key

    def _rows_of(self, keys: np.ndarray) -> np.ndarray:
        """Rows of ``keys`` in the table (row 0 for a key it lacks, and for key 0)."""
        if not len(self.table):
            return np.zeros(len(keys), dtype=np.int64)
        found = np.searchsorted(self.table, keys)
        clipped = np.minimum(found, len(self.table) - 1)
        return np.where(self.table[clipped] == keys, clipped + 1, 0).astype(np.int64)

    def _seed(self, k: int) -> np.uint64:
        """The key a template starts from: its name, so a reordered template keeps its keys."""
        seed = np.uint64(0)
        for ch in self.templates[k].name + "\0" + self.templates[k].text:
            seed = np.uint64((int(seed) * 1_000_003 + ord(ch)) % (1 << 64))
        return seed

    def _value_count(self, column: int) -> int:
        """Value ids a cell of ``column`` can read: unseen, the values, boundaries on both sides."""
        return len(self.vocabularies[column]) + 1 + 2 * self.reach

    # ------------------------------------------------------------------ saving
    def to_json(self) -> dict:
        """Templates and vocabularies; the table is saved with the weights (model.safetensors)."""
        return {"template": template_text(self.templates),
                "columns": {str(column): list(vocabulary) for column, vocabulary in self.vocabularies.items()},
                "keys": len(self.table)}

    @classmethod
    def from_json(cls, data: dict) -> "TemplateFeaturizer":
        vocabularies = {int(column): {value: i + 1 for i, value in enumerate(values)}
                        for column, values in data["columns"].items()}
        featurizer = cls(parse_template(data["template"], "config.json"), vocabularies)
        featurizer.table = np.zeros(int(data["keys"]), dtype=np.uint64)  # until the weights give it
        return featurizer


def _column_values(sequences: Sequence[TokenSequence], columns: list[int]) -> list[list[str | None]]:
    """For each template column (0: the token, ``k``: the ``k``-th feature column), its value at
    every token, sequences end to end (None where a sequence lacks the column)."""
    return column_values(sequences, [column - 1 for column in columns])


def column_value_counts(sequences: Sequence[TokenSequence], n_columns: int, cap: int = 10_000) -> list[int]:
    """Distinct values of each column (0: the token), counted up to ``cap``; what
    :func:`textorch.data.crf_template.generated_template` needs to tell narrow columns from wide."""
    counts = []
    for values in _column_values(sequences, list(range(n_columns))):
        seen = set(values)
        seen.discard(None)
        counts.append(min(len(seen), cap))
    return counts
