"""GROBID input to tag, read as chunks of rows: a whole file's lines handled a block at a time.

Why a second reader of the same format: tagging a GROBID file with a short-sequence model (a
date model reads four-token sequences) spends more time turning each line into a
:class:`~textorch.data.corpus.TokenSequence` (a list of fields per token, an object per
sequence) and each answer back into text than the network spends on it. Here the lines of a
block are never split one by one: a chunk keeps its token lines as they were read, cut into
sequences by arrays of lengths (:class:`RowChunk`); the fields the encoder reads come from one
split of the chunk's distinct lines, column by column (:func:`chunk_columns`); the output is
each line with its label appended (:func:`textorch.data.writers.grobid_rows_text`).

It is a fast path, never a second set of rules: the chunks are cut exactly where
:func:`textorch.data.streams.chunks` cuts the sequences of
:func:`textorch.data.streams.stream_grobid`, and a chunk whose lines are not plain
single-space rows of the file's layout (a tab, a doubled space, another field count, a bad gold
label) is parsed by :class:`~textorch.data.sequence_parsers.GrobidParser` itself
(:func:`chunk_sequences`), which reads it, or reports the line at fault, as it always has.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress, count, repeat
from pathlib import Path

import numpy as np

from textorch.data.columns import DISTINCT_SHARE, ColumnValues
from textorch.data.corpus import TokenSequence
from textorch.data.sequence_parsers import GrobidParser, grobid_layout, split_fields
from textorch.data.streams import BLOCK_BYTES, numbered_blocks
from textorch.data.tags import grobid_label_error
from textorch.errors import ConfigError, DataError


@dataclass
class RowChunk:
    """Consecutive sequences of a GROBID file as its token lines: sequence ``i`` is the
    ``lengths[i]`` lines after those of the sequences before it."""

    lines: list[str]
    """Token lines (blank lines dropped), as read."""
    numbers: np.ndarray
    """int64 line number of each token line in the file."""
    lengths: np.ndarray
    """int64 tokens of each sequence."""

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def n_tokens(self) -> int:
        return len(self.lines)


@dataclass(frozen=True)
class RowLayout:
    """The layout the file's first token line fixes for every later line (as ``GrobidParser``
    fixes it): its field count, whether the last field is a gold label, the feature count."""

    width: int
    line: int
    has_label: bool
    n_features: int

    @classmethod
    def of_first_line(cls, path: str | Path, chunk: RowChunk, n_features: int | None) -> "RowLayout":
        """The layout of ``chunk``'s first line, the file's first token line; raises the parser's
        ``DataError`` when that line does not fit the model."""
        width = len(split_fields(chunk.lines[0]))
        line = int(chunk.numbers[0])
        has_label, n_feat = grobid_layout(path, line, width, False, n_features)
        return cls(width, line, has_label, n_feat)


@dataclass
class RowColumns:
    """What encoding a chunk reads: each token and some feature columns (see :class:`ColumnValues`)."""

    tokens: list[str]
    values: ColumnValues


def row_chunks(path: str | Path, max_sequences: int, max_tokens: int,
               block_bytes: int = BLOCK_BYTES) -> Iterator[RowChunk]:
    """The chunks :func:`textorch.data.streams.chunks` makes of the file's sequences, as rows.

    A sequence is a run of lines that are neither empty nor whitespace alone. A chunk closes once
    it holds ``max_sequences`` sequences or ``max_tokens`` tokens (and at least two sequences);
    it is handed out once the next holds two, and a lone last sequence joins the chunk before it.
    A bad byte raises its ``DataError`` after the chunks of the sequences completed before it.
    """
    if max_sequences < 2 or max_tokens < 1:
        raise ConfigError(f"a chunk holds at least 2 sequences and 1 token (got {max_sequences}, {max_tokens})")
    cutter = _ChunkCutter(max_sequences, max_tokens)
    try:
        for before, lines in numbered_blocks(path, block_bytes):
            yield from cutter.add_block(before, lines)
    except DataError:
        yield from cutter.finish(complete=False)
        raise
    yield from cutter.finish(complete=True)


class _ChunkCutter:
    """The state of :func:`row_chunks` between blocks: the open chunk's token lines (its last
    sequence possibly still open) and the closed chunk held until the next holds two sequences."""

    def __init__(self, max_sequences: int, max_tokens: int) -> None:
        self.max_sequences = max_sequences
        self.max_tokens = max_tokens
        self.lines: list[str] = []
        self.numbers: list[np.ndarray] = []
        self.lengths: list[int] = []
        self.tokens = 0
        """Tokens of the open chunk's completed sequences."""
        self.open_tokens = 0
        """Token lines at the end of ``lines`` of a sequence not closed yet by a blank line."""
        self.held: RowChunk | None = None

    def add_block(self, before: int, lines: list[str]) -> Iterator[RowChunk]:
        blank = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines)) == 0  # two C-level passes, no
        blank |= np.fromiter(map(str.isspace, lines), dtype=bool, count=len(lines))  # Python call per line
        at = np.flatnonzero(~blank)
        if not len(at):
            if self.open_tokens:
                yield from self._close_sequences([self.open_tokens])
                self.open_tokens = 0
            return
        self.lines.extend(compress(lines, (~blank).tolist()))
        self.numbers.append(at + (before + 1))
        run_starts = np.flatnonzero(np.diff(at, prepend=-2) != 1)
        runs = np.diff(np.append(run_starts, len(at))).tolist()
        if self.open_tokens:
            if at[0] == 0:
                runs[0] += self.open_tokens  # the block goes on with the open sequence
            else:
                runs.insert(0, self.open_tokens)
        ends_open = at[-1] == len(lines) - 1
        self.open_tokens = runs.pop() if ends_open else 0
        yield from self._close_sequences(runs)

    def finish(self, complete: bool) -> Iterator[RowChunk]:
        """The chunks left at the end of the input. ``complete``: the input ended, and a last
        sequence without a blank line after it is one; else a bad byte stopped the reading and
        that sequence is dropped, as the line parser drops it."""
        if self.open_tokens:
            if complete:
                yield from self._close_sequences([self.open_tokens])
            else:
                self.lines, self.numbers = self._tokens_kept(len(self.lines) - self.open_tokens)
            self.open_tokens = 0
        rest = self._cut(len(self.lengths)) if self.lengths else None
        if self.held is not None:
            if rest is not None:
                self.held = _joined(self.held, rest)
            yield self.held
            self.held = None
        elif rest is not None:
            yield rest

    def _close_sequences(self, lengths: list[int]) -> Iterator[RowChunk]:
        for n in lengths:
            self.lengths.append(n)
            self.tokens += n
            if len(self.lengths) < 2:
                continue
            if self.held is not None:
                yield self.held
                self.held = None
            if len(self.lengths) >= self.max_sequences or self.tokens >= self.max_tokens:
                self.held = self._cut(len(self.lengths))

    def _cut(self, n_sequences: int) -> RowChunk:
        """The open chunk's first ``n_sequences`` completed sequences as a chunk, removed from it."""
        lengths = self.lengths[:n_sequences]
        n_tokens = sum(lengths)
        numbers = np.concatenate(self.numbers) if len(self.numbers) != 1 else self.numbers[0]
        chunk = RowChunk(self.lines[:n_tokens], numbers[:n_tokens], np.asarray(lengths, dtype=np.int64))
        self.lines, self.numbers = self.lines[n_tokens:], [numbers[n_tokens:]]
        self.lengths = self.lengths[n_sequences:]
        self.tokens -= n_tokens
        return chunk

    def _tokens_kept(self, n_tokens: int) -> tuple[list[str], list[np.ndarray]]:
        numbers = np.concatenate(self.numbers) if self.numbers else np.zeros(0, dtype=np.int64)
        return self.lines[:n_tokens], [numbers[:n_tokens]]


def _joined(first: RowChunk, second: RowChunk) -> RowChunk:
    return RowChunk(first.lines + second.lines, np.concatenate([first.numbers, second.numbers]),
                    np.concatenate([first.lengths, second.lengths]))


def chunk_columns(chunk: RowChunk, layout: RowLayout, columns: list[int]) -> RowColumns | None:
    """Each token and the values of ``columns`` (numbered as
    :func:`textorch.data.columns.column_values` numbers them: -1 the token, ``k`` the ``k``-th
    feature column) of a chunk whose every line is a plain row of ``layout``: fields separated by
    one space, no tab, none empty, ``layout.width`` of them, a valid gold label where the layout
    has one. None otherwise: :func:`chunk_sequences` then parses the chunk, or names the line at fault.

    Lines repeat in GROBID files (the same token with the same layout features); where they
    repeat enough, only the distinct lines are split and the values are kept per distinct line.
    """
    first_of: dict[str, int] = {}
    first = np.fromiter(map(first_of.setdefault, chunk.lines, count()), dtype=np.int64, count=chunk.n_tokens)
    by_line = len(first_of) <= DISTINCT_SHARE * chunk.n_tokens
    rows = list(first_of) if by_line else chunk.lines
    fields = _plain_fields(rows, layout.width)
    if fields is None:
        return None
    if layout.has_label and any(map(grobid_label_error, set(fields[layout.width - 1::layout.width]))):
        return None
    values: dict[int, list[str | None]] = {}
    for column in columns:
        field = column + 1
        values[column] = fields[field::layout.width] if field <= layout.n_features else [None] * len(rows)
    tokens = fields[0::layout.width]
    if not by_line:
        return RowColumns(tokens, ColumnValues(values))
    number = np.empty(len(first), dtype=np.int64)  # each distinct line's number, in order of first use
    firsts = np.flatnonzero(first == np.arange(len(first)))
    number[firsts] = np.arange(len(firsts))
    inverse = number[first]
    return RowColumns(list(map(tokens.__getitem__, inverse.tolist())), ColumnValues(values, inverse))


def _plain_fields(rows: list[str], width: int) -> list[str] | None:
    """All fields of ``rows`` end to end when every row has ``width`` single-space separated,
    non-empty fields (no tab); None otherwise."""
    joined = " ".join(rows)
    if "\t" in joined:
        return None
    if any(map(int(width - 1).__ne__, map(str.count, rows, repeat(" ")))):
        return None
    fields = joined.split(" ")
    if "" in fields:
        return None
    return fields


def chunk_sequences(path: str | Path, chunk: RowChunk, layout: RowLayout | None, n_features: int | None,
                    read: list[TokenSequence]) -> list[TokenSequence]:
    """The chunk's sequences as :func:`textorch.data.streams.stream_grobid` reads them, each
    appended to ``read`` as it is parsed (so that, when a line is at fault and its ``DataError``
    is raised, the sequences before it are there to be tagged). ``layout``: the file's, fixed by
    an earlier chunk; None for the file's first chunk."""
    parser = GrobidParser(path, labelled=False, n_features=n_features)
    if layout is not None:
        parser.fix_layout(layout.has_label, layout.n_features, layout.width, layout.line)
    for sequence in parser.sequences(_numbered(chunk)):
        read.append(sequence)
    return read


def _numbered(chunk: RowChunk) -> Iterator[tuple[int, str]]:
    """The chunk's lines with their numbers, a blank line after each sequence."""
    numbers = chunk.numbers.tolist()
    start = 0
    for n in chunk.lengths.tolist():
        yield from zip(numbers[start:start + n], chunk.lines[start:start + n])
        start += n
        yield numbers[start - 1] + 1, ""
