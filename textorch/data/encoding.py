"""Turning token sequences into index arrays, once, before training or tagging.

Encoding is done a single time per corpus (not per epoch) so the training loop only pads
ready-made arrays.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from textorch.data.columns import CallColumns, ColumnValues, call_columns
from textorch.data.corpus import TokenSequence
from textorch.data.crf_template import FeatureTemplate
from textorch.data.template_features import TemplateFeaturizer
from textorch.data.vocab import Vocabulary

TOKEN_SHAPE_CACHE_SIZE = 200_000
"""Token strings whose character ids and casing class an encoder keeps (tens of MB at most)."""

CASING_CLASSES = ("<pad>", "numeric", "mostly_numeric", "lower", "upper", "initial_upper", "has_digit", "other")


def casing_class(token: str) -> int:
    """Coarse shape of a token (DeLFT's casing input), as an index into ``CASING_CLASSES``."""
    digits = sum(ch.isdigit() for ch in token)
    if token.isdigit():
        return 1
    if digits / max(len(token), 1) > 0.5:
        return 2
    if token.islower():
        return 3
    if token.isupper():
        return 4
    if token[:1].isupper():
        return 5
    if digits:
        return 6
    return 7


@dataclass
class CallArrays:
    """The id arrays of one ``encode_many`` call, its sequences end to end (one row per token).

    Every sequence of the call holds views of these rows; a batch of them is gathered from
    here with one index per array (:func:`textorch.data.batching.collate`) rather than
    concatenated from the sequences' views, a NumPy call per sequence and array."""

    casing_ids: np.ndarray  # (N,)
    feature_ids: np.ndarray | None  # (N, F)
    word_ids: np.ndarray | None  # (N,)
    type_ids: np.ndarray  # (N,)
    template_rows: np.ndarray | None = None  # (N, templates)


@dataclass
class EncodedCall:
    """One ``encode_many`` call's arrays and where each sequence lies in them."""

    arrays: CallArrays
    type_table: np.ndarray
    """Character ids of every token type of the call (see :attr:`EncodedSequence.type_table`)."""
    bounds: np.ndarray
    """int64 ``(sequences + 1,)``: sequence ``i`` is rows ``bounds[i]:bounds[i + 1]``."""
    char_widths: np.ndarray
    """int64 characters of each sequence's widest token (at least 1)."""


@dataclass
class EncodedSequence:
    """Index arrays of one sequence; ``word_ids`` index a :class:`WordTable`."""

    casing_ids: np.ndarray  # (L,)
    feature_ids: np.ndarray | None  # (L, F)
    label_ids: np.ndarray | None  # (L,)
    word_ids: np.ndarray | None  # (L,)
    type_ids: np.ndarray  # (L,) same id = same token string, within one encode_many call
    type_table: np.ndarray
    """Character ids of every token type of that call, row = type id, shared by all its sequences
    (what ``textorch.data.batching.token_type_table`` returns)."""
    char_width: int
    """Characters of this sequence's widest token (at least 1)."""
    template_rows: np.ndarray | None = None
    """(L, templates) rows of the CRF-template feature table (models with template features)."""
    _char_ids: np.ndarray | None = field(default=None, repr=False, compare=False)
    call: CallArrays | None = field(default=None, repr=False, compare=False)
    """The arrays of the whole ``encode_many`` call this sequence's arrays are rows of."""
    start: int = field(default=0, repr=False, compare=False)
    """This sequence's first row in ``call``'s arrays."""

    @property
    def char_ids(self) -> np.ndarray:
        """(L, char_width) int64, 0-padded on the right; gathered from the call's table on first
        use: tagging with the PyTorch engine reads the table alone (character vectors per token
        type), and one gather per sequence, done eagerly, was a large share of encoding a file."""
        if self._char_ids is None:
            self._char_ids = self.type_table[self.type_ids, : self.char_width]
        return self._char_ids

    def __len__(self) -> int:
        return len(self.casing_ids)


def _widest_per_sequence(token_widths: np.ndarray, bounds: np.ndarray) -> list[int]:
    """Characters of each sequence's widest token (at least 1), sequence ``i`` being
    ``token_widths[bounds[i]:bounds[i + 1]]``: one NumPy reduction for all sequences, where a
    ``max`` per sequence pays a NumPy call per sequence, a noticeable share of encoding a file."""
    if len(bounds) == 2:  # one sequence (a stream of small calls): no reduction to set up
        return [max(int(token_widths.max(initial=0)), 1)]
    widest = np.ones(len(bounds) - 1, dtype=np.int64)
    starts = bounds[:-1]
    nonempty = np.flatnonzero(bounds[1:] > starts)
    if len(nonempty):
        # Between two non-empty sequences lie only empty ones: each segment is one sequence.
        widest[nonempty] = np.maximum(np.maximum.reduceat(token_widths, starts[nonempty]), 1)
    return widest.tolist()


SMALL_TABLE_ROWS = 32
"""Token types up to which :func:`_char_table` fills rows one by one: the one masked copy that
pays for a whole file costs more than a few row copies (one-sequence calls)."""


def _char_table(char_ids: list[list[int]], widths: np.ndarray) -> np.ndarray:
    """Rows of character ids, zero-padded to the widest (at least 1 column): one flat copy
    through a mask instead of a slice assignment per row."""
    table = np.zeros((len(char_ids), max(int(widths.max(initial=0)), 1)), dtype=np.int64)
    if len(char_ids) <= SMALL_TABLE_ROWS:  # a one-sequence call: the mask costs more than it saves
        for row, ids in enumerate(char_ids):
            table[row, : len(ids)] = ids
    else:
        flat = np.fromiter(itertools.chain.from_iterable(char_ids), dtype=np.int64, count=int(widths.sum()))
        table[np.arange(table.shape[1]) < widths[:, None]] = flat
    return table


class SequenceEncoder:
    """Vocabularies of characters, labels and feature values, and the encoding they define."""

    def __init__(
        self,
        chars: Vocabulary,
        labels: Vocabulary,
        features: list[Vocabulary],
        feature_columns: list[int],
        max_char_length: int = 30,
        templates: TemplateFeaturizer | None = None,
    ) -> None:
        self.chars = chars
        self.templates = templates
        """The CRF-template features of models that add them to their emissions, else None."""
        self.labels = labels
        self.features = features
        self.feature_columns = feature_columns
        self.max_char_length = max_char_length
        # Character ids and casing class per token string, kept across calls: streams of small
        # tagging calls see the same tokens again and again. Emptied when full, and whenever
        # the character vocabulary grows (incremental training adds characters).
        self._shapes: dict[str, tuple[list[int], int]] = {}
        self._shapes_vocab_size = len(chars)
        self.compiled_rows = False
        """Template rows by the compiled loop (:mod:`textorch.data.template_kernel`): set by an
        owner that loads Numba anyway (a labeler in PyTorch), never by the torch-free tagger."""

    @classmethod
    def fit(
        cls, sequences: list[TokenSequence], feature_columns: list[int], max_char_length: int = 30,
        templates: list[FeatureTemplate] | None = None,
    ) -> "SequenceEncoder":
        char_counts: Counter = Counter()
        label_counts: Counter = Counter()
        feature_counts: list[Counter] = [Counter() for _ in feature_columns]
        for sequence in sequences:
            for token in sequence.tokens:
                char_counts.update(token[:max_char_length])
            if sequence.labels:
                label_counts.update(sequence.labels)
            for token_features in sequence.features or ():
                for slot, column in enumerate(feature_columns):
                    feature_counts[slot][token_features[column]] += 1
        # "O" first so that label id 0 is the neutral label used for padded positions.
        labels = sorted(label_counts, key=lambda lab: (lab != "O", lab[2:], lab))
        return cls(
            chars=Vocabulary.from_counts(char_counts),
            labels=Vocabulary(labels, with_specials=False),
            features=[Vocabulary.from_counts(counts) for counts in feature_counts],
            feature_columns=list(feature_columns),
            max_char_length=max_char_length,
            templates=TemplateFeaturizer.fit(sequences, templates) if templates else None,
        )

    def encode(self, sequence: TokenSequence, with_labels: bool = True) -> EncodedSequence:
        return self.encode_many([sequence], with_labels)[0]

    def encode_many(
        self, sequences: list[TokenSequence], with_labels: bool = True,
        word_rows: Callable[[list[str]], np.ndarray] | None = None,
    ) -> list[EncodedSequence]:
        """Encode sequences sharing one table of token types.

        Each distinct token string is turned into character ids and a casing class once
        (tokens repeat: CoNLL-2003's test set has 46k tokens of 9.5k types), and gets a type id
        that lets a batch run the character encoder once per distinct token
        (:func:`textorch.data.batching.collate`). The table lives for this call only, so
        tagging an endless stream never grows it. The per-token work is done for all sequences
        at once, in NumPy: a per-sequence, per-token Python loop was a large share of whole-file
        tagging.
        ``word_rows`` (a :meth:`WordTable.index`) gives the distinct tokens their word-vector
        rows, also looked up once per token type.
        """
        encoded = self.encode_call(call_columns(sequences, self.columns_read), word_rows)
        call, table = encoded.arrays, encoded.type_table
        casing, feature_ids, word_ids, type_ids, template_rows = (
            call.casing_ids, call.feature_ids, call.word_ids, call.type_ids, call.template_rows)
        starts, ends = encoded.bounds[:-1].tolist(), encoded.bounds[1:].tolist()
        return [
            EncodedSequence(
                casing[a:b], None if feature_ids is None else feature_ids[a:b], self._labels_of(sequence, with_labels),
                None if word_ids is None else word_ids[a:b], type_ids[a:b], table, width,
                None if template_rows is None else template_rows[a:b], call=call, start=a,
            )
            for sequence, a, b, width in zip(sequences, starts, ends, encoded.char_widths.tolist())
        ]

    def encode_call(self, columns: CallColumns,
                    word_rows: Callable[[list[str]], np.ndarray] | None = None) -> EncodedCall:
        """The arrays of :meth:`encode_many` for sequences given as columns (``columns.values``
        holding :attr:`columns_read`): for callers that never build a :class:`TokenSequence`
        (:mod:`textorch.data.row_chunks`)."""
        tokens, lengths, values = columns.tokens, columns.lengths, columns.values
        if len(self.chars) != self._shapes_vocab_size:
            self._shapes.clear()
            self._shapes_vocab_size = len(self.chars)
        bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        type_of = dict.fromkeys(tokens)
        for i, token in enumerate(type_of):
            type_of[token] = i
        distinct = list(type_of)
        shapes = [self._shape(token) for token in distinct]
        type_ids = np.fromiter(map(type_of.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        char_ids = [chars for chars, _ in shapes]
        widths = np.fromiter(map(len, char_ids), dtype=np.int64, count=len(shapes))
        table = _char_table(char_ids, widths)
        casing = np.fromiter((casing for _, casing in shapes), dtype=np.int64, count=len(shapes))[type_ids]
        word_ids = None if word_rows is None else word_rows(distinct)[type_ids]
        char_widths = np.asarray(_widest_per_sequence(widths[type_ids], bounds), dtype=np.int64)
        template_rows = None if self.templates is None else self.templates.call_rows(None, values, lengths,
                                                                                           self.compiled_rows)
        feature_ids = self._feature_ids(bounds, values, columns.without_features)
        call = CallArrays(casing, feature_ids, word_ids, type_ids, template_rows)
        return EncodedCall(call, table, bounds, char_widths)

    def _shape(self, token: str) -> tuple[list[int], int]:
        """Character ids and casing class of a token string, kept across calls (bounded)."""
        shape = self._shapes.get(token)
        if shape is None:
            char_id = self.chars.id
            shape = ([char_id(ch) for ch in token[: self.max_char_length]], casing_class(token))
            if len(self._shapes) >= TOKEN_SHAPE_CACHE_SIZE:
                self._shapes.clear()
            self._shapes[token] = shape
        return shape

    @property
    def columns_read(self) -> list[int]:
        """Every feature column the feature channel or the template features read, by
        :func:`textorch.data.columns.column_values`' number (-1: the token), read once for both."""
        columns = set(self.feature_columns)
        if self.templates is not None:
            columns.update(self.templates.feature_columns)
        return sorted(columns)

    def _feature_ids(self, bounds: np.ndarray, values: ColumnValues, without_features: list[int]) -> np.ndarray | None:
        """``(tokens, slots)`` ids of the feature channel's columns for all ``sequences`` end to
        end (``bounds`` cut them apart): unseen values (and a column a sequence lacks) get
        ``<unk>``, a sequence without features zeros. One column at a time over the whole call:
        a vocabulary look-up per sequence and column was a large share of encoding a file."""
        if not self.feature_columns:
            return None
        feature_ids = np.empty((int(bounds[-1]), len(self.feature_columns)), dtype=np.int64)
        for slot, column in enumerate(self.feature_columns):
            vocabulary = self.features[slot]
            feature_ids[:, slot] = values.ids(column, vocabulary._index, vocabulary.unk_id)
        for i in without_features:
            feature_ids[bounds[i]:bounds[i + 1]] = 0
        return feature_ids

    def _labels_of(self, sequence: TokenSequence, with_labels: bool) -> np.ndarray | None:
        if not with_labels or sequence.labels is None:
            return None
        return np.asarray(self.label_ids(sequence.labels, sequence), dtype=np.int64)

    def label_ids(self, labels: list[str], sequence: TokenSequence) -> list[int]:
        """Map labels to ids; labels never seen in training map to "O" (id 0) for evaluation."""
        index = self.labels._index
        return [index.get(label, 0) for label in labels]

    def to_json(self) -> dict:
        data = {
            "chars": self.chars.to_json(),
            "labels": self.labels.to_json(),
            "features": [vocab.to_json() for vocab in self.features],
            "feature_columns": self.feature_columns,
            "max_char_length": self.max_char_length,
        }
        if self.templates is not None:  # absent otherwise: older releases read the same file
            data["templates"] = self.templates.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict) -> "SequenceEncoder":
        return cls(
            chars=Vocabulary.from_json(data["chars"]),
            labels=Vocabulary.from_json(data["labels"]),
            features=[Vocabulary.from_json(v) for v in data["features"]],
            feature_columns=[int(c) for c in data["feature_columns"]],
            max_char_length=int(data["max_char_length"]),
            templates=TemplateFeaturizer.from_json(data["templates"]) if "templates" in data else None,
        )
