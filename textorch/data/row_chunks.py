"""GROBID input to tag, read as chunks of rows: a whole file's lines handled a block at a time.

Why a second reader of the same format: tagging a GROBID file with a short-sequence model (a
date model reads four-token sequences) spends more time turning each line into a
:class:`~textorch.data.corpus.TokenSequence` (a list of fields per token, an object per
sequence) and each answer back into text than the network spends on it. Here the lines of a
block are never split one by one: a chunk keeps its token lines as they were read, cut into
sequences by arrays of lengths (:class:`RowChunk`); the fields the encoder reads come from one
split of the chunk's distinct lines, column by column (:func:`chunk_columns`); the output is
each line with its label appended (:func:`textorch.data.writers.grobid_rows_text`).

It is a fast path, never a second set of rules: the chunks are cut by
:func:`textorch.data.streams.chunks` itself, over each sequence's span of lines, where it cuts
the sequences of :func:`textorch.data.streams.stream_grobid`; the columns are what
:func:`textorch.data.columns.call_columns` gives the encoder from sequences; and a chunk whose lines are not plain
single-space rows of the file's layout (a tab, a doubled space, another field count, a bad gold
label) is parsed by :class:`~textorch.data.sequence_parsers.GrobidParser` itself
(:func:`chunk_sequences`), which reads it, or reports the line at fault, as it always has.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import itemgetter, sub
from pathlib import Path

import numpy as np

from textorch.data.columns import DISTINCT_SHARE, CallColumns, ColumnValues
from textorch.data.corpus import TokenSequence
from textorch.data.sequence_parsers import GrobidParser, grobid_layout, split_fields
from textorch.data.streams import BLOCK_BYTES, chunks, numbered_blocks, until_error
from textorch.data.tags import grobid_label_error
from textorch.errors import TextorchError


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


def row_chunks(path: str | Path, max_sequences: int, max_tokens: int,
               block_bytes: int = BLOCK_BYTES) -> Iterator[RowChunk]:
    """The chunks :func:`textorch.data.streams.chunks` makes of the file's sequences, as rows:
    the same rule, applied to each sequence's span of token lines instead of a sequence object.
    A sequence is a run of lines that are neither empty nor whitespace alone. A bad byte raises
    its ``DataError`` after the chunks of the sequences completed before it."""
    lines = _TokenLines()
    failure: list[TextorchError] = []
    for part in chunks(until_error(lines.spans(path, block_bytes), failure), max_sequences, max_tokens,
                       size=itemgetter(1)):
        yield lines.take(part)
    if failure:
        raise failure[0]


class _TokenLines:
    """The file's token lines read but not yet handed out in a chunk (a block's worth and the
    chunks :func:`textorch.data.streams.chunks` holds back), with their line numbers."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.numbers: list[np.ndarray] = []  # a block's worth per array
        self.first = 0
        """The file's token line (counted from 0) that ``lines[0]`` is."""

    def spans(self, path: str | Path, block_bytes: int) -> Iterator[tuple[int, int]]:
        """``(first token line, token lines)`` of each sequence of the file, in order, read a block
        at a time; a sequence still open when a bad byte stops the reading is dropped, as the line
        parser drops it."""
        read = 0  # token lines read so far
        open_start: int | None = None  # where a sequence not yet closed by a blank line starts
        for before, block in numbered_blocks(path, block_bytes):
            blank = np.fromiter(map(len, block), dtype=np.int64, count=len(block)) == 0  # two C-level passes,
            blank |= np.fromiter(map(str.isspace, block), dtype=bool, count=len(block))  # no Python per line
            at = np.flatnonzero(~blank)
            if not len(at):
                if open_start is not None:
                    yield open_start, read - open_start
                    open_start = None
                continue
            self.lines.extend(compress(block, (~blank).tolist()))
            self.numbers.append(at + (before + 1))
            first_of_run = np.flatnonzero(np.diff(at, prepend=-2) != 1)  # runs of consecutive token lines
            starts = (first_of_run + read).tolist()
            ends = (np.append(first_of_run[1:], len(at)) + read).tolist()
            if open_start is not None:
                if at[0] == 0:
                    starts[0] = open_start  # the block goes on with the open sequence
                else:
                    yield open_start, read - open_start
            read += len(at)
            open_start = None
            if at[-1] == len(block) - 1:  # the block ends inside a sequence
                open_start = starts.pop()
                ends.pop()
            yield from zip(starts, map(sub, ends, starts))
        if open_start is not None:
            yield open_start, read - open_start

    def take(self, spans: list[tuple[int, int]]) -> RowChunk:
        """The chunk of ``spans``, the first sequences not handed out yet, removed from the lines kept."""
        stop = spans[-1][0] + spans[-1][1] - self.first
        numbers = np.concatenate(self.numbers) if len(self.numbers) != 1 else self.numbers[0]
        chunk = RowChunk(self.lines[:stop], numbers[:stop],
                         np.fromiter(map(itemgetter(1), spans), dtype=np.int64, count=len(spans)))
        del self.lines[:stop]
        self.numbers = [numbers[stop:]]
        self.first += stop
        return chunk


def chunk_columns(chunk: RowChunk, layout: RowLayout, columns: list[int]) -> CallColumns | None:
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
        return CallColumns(tokens, chunk.lengths, ColumnValues(values))
    number = np.empty(len(first), dtype=np.int64)  # each distinct line's number, in order of first use
    firsts = np.flatnonzero(first == np.arange(len(first)))
    number[firsts] = np.arange(len(firsts))
    inverse = number[first]
    return CallColumns(list(map(tokens.__getitem__, inverse.tolist())), chunk.lengths, ColumnValues(values, inverse))


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
