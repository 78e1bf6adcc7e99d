"""Sparse CRF-style features of token sequences: CRF++ templates turned into table rows.

A CRF such as GROBID's Wapiti scores each label with one weight per (template, observed value)
pair seen in training. :class:`TemplateFeaturizer` gives every token, for each unigram template,
the row of that pair in a table fitted on the training data (row 0: a pair never seen in
training, which has no weight, exactly as a CRF gives none). A network adds the weights of those
rows to its emissions (:class:`textorch.models.template_emissions.TemplateEmissions`).

Values become integers once per column (a vocabulary per column the templates read), and each
template's value combination becomes a 64-bit key computed with NumPy a few thousand tokens at a
time: no per-token, per-template string is ever built, and no array of every key of a corpus
(a corpus of whole documents has hundreds of millions). The fitted table is the sorted array of
the keys seen in training; a row is a key's position in it. Rows are int32 (int64 only for a
table too big for it): a corpus's rows are a tokens-by-templates array, the largest one that
training keeps. For templates with few value combinations (one narrow column, or a pair of
them) the rows of every combination are computed once (a lookup array), so tagging gathers them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from textorch.data.columns import ColumnValues, column_values, read_columns
from textorch.data.corpus import TokenSequence
from textorch.data.crf_template import FeatureTemplate, parse_template, template_text
from textorch.data.template_kernel import TemplateProgram, rows_kernel

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant of multiplicative hashing
_INT32_MAX = int(np.iinfo(np.int32).max)
TOKENS_PER_PASS = 1024
"""Tokens whose rows :meth:`TemplateFeaturizer.call_rows` computes in one pass (about, whole
sequences): large enough that NumPy's per-call cost is small, small enough to stay in cache."""
FIT_TOKENS_PER_PASS = 1 << 15
"""Tokens whose keys :meth:`TemplateFeaturizer.fit` computes at once (about, whole sequences):
their keys for every template are tens of MB, where a whole corpus's at once would be gigabytes."""
LOOKUP_LIMIT = 1 << 16
"""Templates with at most this many value combinations get a lookup array of their rows (built
once per model); the others search the table for each token's key."""


@dataclass
class _LookupGroup:
    """Lookup templates of one cell count, done together by :meth:`TemplateFeaturizer._pass_rows`:
    template ``templates[i]``'s row for cell values ``v`` is ``rows[offsets[i] + sum(v * strides[i])]``."""

    templates: np.ndarray  # (T,) template numbers
    cells: np.ndarray  # (T, cells) cell slots of the cell matrix
    strides: np.ndarray  # (T, cells) row-major strides of each template's value combinations
    offsets: np.ndarray  # (T,) where each template's combinations start in rows
    rows: np.ndarray  # every template's lookup array, end to end


class _Plan:
    """How a featurizer's templates read a call, worked out once per table: the distinct cells
    and, per row offset, which columns they read; the lookup templates grouped by cell count;
    the templates searched in the table instead."""

    def __init__(self, featurizer: "TemplateFeaturizer") -> None:
        cells = sorted({cell for template in featurizer.templates for cell in template.cells})
        self.cell_slot = {cell: slot for slot, cell in enumerate(cells)}
        self.columns = sorted({column for _, column in cells})
        column_slot = {column: slot for slot, column in enumerate(self.columns)}
        self.sizes = np.array([len(featurizer.vocabularies[column]) + 1 for column in self.columns], dtype=np.int64)
        self.by_row: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for row in sorted({row for row, _ in cells}):
            mine = [cell for cell in cells if cell[0] == row]
            self.by_row[row] = (np.array([self.cell_slot[c] for c in mine], dtype=np.int64),
                                np.array([column_slot[c[1]] for c in mine], dtype=np.int64))
        self.groups: list[_LookupGroup] = []
        for arity in sorted({len(featurizer.templates[k].cells) for k in featurizer._lookups}):
            ks = [k for k in sorted(featurizer._lookups) if len(featurizer.templates[k].cells) == arity]
            strides = [[int(np.prod(featurizer._lookups[k][0][j + 1:])) for j in range(arity)] for k in ks]
            sizes = [len(featurizer._lookups[k][1]) for k in ks]
            self.groups.append(_LookupGroup(
                np.array(ks, dtype=np.int64),
                np.array([[self.cell_slot[cell] for cell in featurizer.templates[k].cells] for k in ks], dtype=np.int64),
                np.array(strides, dtype=np.int64), np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
                np.concatenate([featurizer._lookups[k][1] for k in ks])))
        self.searched = [k for k in range(len(featurizer.templates)) if k not in featurizer._lookups]
        self.program = _program(featurizer, column_slot, self.sizes)


def _program(featurizer: "TemplateFeaturizer", column_slot: dict[int, int], sizes: np.ndarray) -> TemplateProgram:
    """The templates as the compiled loop reads them (:mod:`textorch.data.template_kernel`): the
    lookup arrays end to end in template order, each lookup template's start and strides."""
    lookups: dict[int, tuple[int, list[int]]] = {}
    arrays, at = [], 0
    for k in sorted(featurizer._lookups):
        counts, rows = featurizer._lookups[k]
        lookups[k] = (at, [int(np.prod(counts[j + 1:])) for j in range(len(counts))])
        arrays.append(rows)
        at += len(rows)
    cells = [[(row, column_slot[column]) for row, column in template.cells] for template in featurizer.templates]
    seeds = [featurizer._seed(k) for k in range(len(featurizer.templates))]
    lookup_rows = np.concatenate(arrays) if arrays else np.zeros(1, dtype=featurizer.row_dtype)
    return TemplateProgram(cells, lookups, seeds, sizes, featurizer.reach, lookup_rows)


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
        self._plan = _Plan(self)
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
        seen = featurizer._seen_keys(*featurizer._positions(sequences))
        featurizer.use_table(seen[seen != 0])
        return featurizer

    def _seen_keys(self, ids: dict[int, np.ndarray], position: np.ndarray, length: np.ndarray) -> np.ndarray:
        """The sorted distinct keys of every template at every token, computed a pass of
        :data:`FIT_TOKENS_PER_PASS` tokens at a time. A pass's distinct keys wait until they are
        as many as those merged so far: each merge sorts those again."""
        seen = np.zeros(0, dtype=np.uint64)
        waiting: list[np.ndarray] = []
        for a, b in _passes(position, length, FIT_TOKENS_PER_PASS):
            cells = self._cell_matrix({column: values[a:b] for column, values in ids.items()}, position[a:b], length[a:b])
            keys = [self._keys(k, [cells[self._plan.cell_slot[cell]] for cell in template.cells])
                    for k, template in enumerate(self.templates)]
            waiting.append(np.unique(np.concatenate([seen[:0], *keys])))
            if sum(map(len, waiting)) >= len(seen):
                seen, waiting = np.unique(np.concatenate([seen, *waiting])), []
        return np.unique(np.concatenate([seen, *waiting]))

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
        self._plan = _Plan(self)

    @property
    def n_rows(self) -> int:
        """Rows of the weight table: one per fitted key, plus row 0 (no feature)."""
        return len(self.table) + 1

    @property
    def row_dtype(self) -> type[np.signedinteger]:
        """The integer type of rows: int32 (half the memory of a corpus's rows, which training
        holds whole), int64 only for a table with more rows than int32 counts."""
        return np.int32 if self.n_rows <= _INT32_MAX else np.int64

    # ------------------------------------------------------------------ encoding
    @property
    def feature_columns(self) -> list[int]:
        """The columns the templates read, numbered as :func:`column_values` numbers them (-1:
        the token, ``k``: the ``k``-th feature column after it)."""
        return [column - 1 for column in self.vocabularies]

    def call_rows(self, sequences: Sequence[TokenSequence] | None, values: ColumnValues | None = None,
                  lengths: np.ndarray | None = None, compiled: bool = False) -> np.ndarray:
        """The ``(tokens, templates)`` rows (:attr:`row_dtype`) of the weight table of all
        ``sequences`` end to end. ``values``: :attr:`feature_columns` as :func:`read_columns`
        reads them, when the caller read them already for other features; with ``lengths`` too,
        ``sequences`` is not read (None: a caller that holds columns, not sequences).
        ``compiled``: by the compiled loop (:mod:`textorch.data.template_kernel`) where Numba
        serves, for a process that loads Numba anyway; the same rows."""
        kernel = rows_kernel() if compiled else None
        if kernel is not None:
            if lengths is None:
                assert sequences is not None, "call_rows reads the lengths of the sequences or is given them"
                lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
            if values is None:
                assert sequences is not None, "call_rows reads the columns of the sequences or is given them"
                values = read_columns(sequences, self.feature_columns)
            plan = self._plan
            ids = values.stacked_ids([column - 1 for column in plan.columns],
                                     [self.vocabularies[column] for column in plan.columns], 0, int(lengths.sum()))
            return plan.program.rows(kernel, ids, lengths, self.table, self.row_dtype)
        ids, position, length = self._positions(sequences, values, lengths)
        out = np.empty((len(position), len(self.templates)), dtype=self.row_dtype)
        # A pass over a few thousand tokens at a time: every template's arrays of a pass stay in
        # the processor's cache.
        for a, b in _passes(position, length, TOKENS_PER_PASS):
            out[a:b] = self._pass_rows({column: values[a:b] for column, values in ids.items()},
                                       position[a:b], length[a:b]).T
        return out

    def _pass_rows(self, ids: dict[int, np.ndarray], position: np.ndarray, length: np.ndarray) -> np.ndarray:
        """:meth:`call_rows` of whole sequences, ``(templates, tokens)``. The templates with a
        lookup array are done together, a few NumPy calls per cell count rather than per
        template: on a call of one short sequence (a server's request) NumPy's cost per call,
        paid per template, outweighs the work (docs/performance.md)."""
        cells = self._cell_matrix(ids, position, length)
        out = np.empty((len(self.templates), len(position)), dtype=self.row_dtype)
        for group in self._plan.groups:
            flat = cells[group.cells[:, 0]] * group.strides[:, :1] + group.offsets[:, None]
            for j in range(1, group.cells.shape[1]):
                flat += cells[group.cells[:, j]] * group.strides[:, j:j + 1]
            out[group.templates] = np.take(group.rows, flat)
        for k in self._plan.searched:
            out[k] = self._rows_of(self._keys(k, [cells[self._plan.cell_slot[cell]] for cell in self.templates[k].cells]))
        return out

    def _positions(self, sequences: Sequence[TokenSequence] | None, values: ColumnValues | None = None,
                   lengths: np.ndarray | None = None) -> tuple[dict[int, np.ndarray], np.ndarray, np.ndarray]:
        """Value ids of every token (all sequences end to end) per column, each token's position
        in its sequence and that sequence's length."""
        if lengths is None:
            assert sequences is not None, "call_rows reads the lengths of the sequences or is given them"
            lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        position = np.arange(int(lengths.sum()), dtype=np.int64) - starts
        columns = list(self.vocabularies)
        if values is None:
            assert sequences is not None, "call_rows reads the columns of the sequences or is given them"
            values = read_columns(sequences, self.feature_columns)
        ids = {column: values.ids(column - 1, self.vocabularies[column], 0) for column in columns}
        return ids, position, np.repeat(lengths, lengths)

    def _cell_matrix(self, ids: dict[int, np.ndarray], position: np.ndarray, length: np.ndarray) -> np.ndarray:
        """``(cells, tokens)``: for every cell the templates read (row offset, column; numbered
        by the plan), the value id each token reads there. Past a sequence's end a cell reads a
        boundary id, after the column's values, that tells the side and the distance (1 to
        :attr:`reach`): ``size - distance`` before the start, ``size + reach + distance - 1``
        after the end (``size``: the column's values plus the unseen id)."""
        plan = self._plan
        n = len(position)
        stacked = np.stack([ids[column] for column in plan.columns]) if plan.columns else np.zeros((0, n), dtype=np.int64)
        cells = np.empty((len(plan.cell_slot), n), dtype=np.int64)
        for row, (cell_slots, column_slots) in plan.by_row.items():
            if row == 0:
                cells[cell_slots] = stacked[column_slots]
                continue
            target = position + row
            shifted = np.zeros((len(column_slots), n), dtype=np.int64)  # token i reads token i + row
            if row > 0:
                inside, past = target < length, self.reach + (target - length)
                shifted[:, :max(n - row, 0)] = stacked[column_slots, row:]
            else:
                inside, past = target >= 0, -1 - target
                shifted[:, -row:] = stacked[column_slots, :max(n + row, 0)]
            cells[cell_slots] = np.where(inside, shifted, past + plan.sizes[column_slots, None])
        return cells

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
            return np.zeros(len(keys), dtype=self.row_dtype)
        found = np.searchsorted(self.table, keys)
        clipped = np.minimum(found, len(self.table) - 1)
        return np.where(self.table[clipped] == keys, clipped + 1, 0).astype(self.row_dtype)

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


def _passes(position: np.ndarray, length: np.ndarray, tokens: int) -> list[tuple[int, int]]:
    """``(start, end)`` token ranges of about ``tokens`` tokens each, cut between sequences (no
    cell reads past its own sequence, so a range's rows are those of the whole call), none empty;
    ``position`` and ``length``: each token's place in its sequence and that sequence's length."""
    ends = np.flatnonzero(position + 1 == length) + 1
    cuts = np.unique(ends[np.minimum(np.searchsorted(ends, np.arange(tokens, len(position), tokens)),
                                     len(ends) - 1)]).tolist() if len(ends) else []
    return [(a, b) for a, b in zip([0, *cuts], [*cuts, len(position)]) if b > a]


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
