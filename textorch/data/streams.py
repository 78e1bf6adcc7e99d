"""Files read lazily: numbered lines block by block, sequences one at a time, and chunks of them.

Tagging a file must not hold the file: :func:`numbered_lines` reads a block of bytes, cuts it
after its last newline, decodes that (so a multi-byte character is never split) and hands out
its lines; the parsers of :mod:`textorch.data.sequence_parsers` turn them into sequences as they
come. The rules are the whole-file readers' (:mod:`textorch.data.readers`): UTF-8 checked with
the line and column of a bad byte, a leading BOM dropped, CRLF read as LF, ``.gz`` unpacked,
every problem a ``DataError`` at ``path:line``, raised when the reading reaches that line.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import BinaryIO, TypeVar

from textorch.data.corpus import TokenSequence
from textorch.data.readers import LABELLED_FORMATS, detect_format_of_lines, locate_utf8_error
from textorch.data.sequence_parsers import ConllParser, GrobidParser
from textorch.data.tokenize import tokenize
from textorch.errors import ConfigError, DataError, TextorchError

Item = TypeVar("Item")

BLOCK_BYTES = 1 << 20
"""Bytes read at a time: large enough that decoding and splitting run at whole-file speed."""


def check_input_file(path: str | Path) -> Path:
    """``path`` as a :class:`Path` when it names a regular file, which can be read to its end;
    else the reader's ``DataError`` (not found; not a regular file: a folder, a device such as
    ``/dev/zero`` that never ends, a FIFO whose opening waits for a writer). Asked without
    opening the path, before anything else reads it."""
    file = Path(path)
    if not file.exists():
        raise DataError(path, None, "file not found")
    if not file.is_file():
        raise DataError(path, None, "not a regular file")
    return file


def _open(path: str | Path) -> BinaryIO:
    file = check_input_file(path)
    try:
        return gzip.open(file, "rb") if file.name.endswith(".gz") else open(file, "rb")  # type: ignore[return-value]
    except OSError as exc:
        raise DataError(path, None, f"cannot read file: {exc.strerror or exc}") from None


def numbered_lines(path: str | Path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every item of ``text.split("\\n")`` of the decoded file.

    As the whole-file readers split, the last item is what follows the last newline (an empty
    string when the file ends with one, or is empty).
    """
    for before, lines in numbered_blocks(path, block_bytes):
        yield from zip(count(before + 1), lines)


def numbered_blocks(path: str | Path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, list[str]]]:
    """The lines of :func:`numbered_lines` a block at a time: ``(lines before the block, its lines)``.

    For readers that work on a block's lines at once (:mod:`textorch.data.row_chunks`) rather
    than line by line. A bad byte raises its ``DataError`` once the lines before it are handed out.
    """
    lineno = 0
    carry = b""
    first = True
    with _open(path) as handle:
        while True:
            block, read_error = _read_block(handle, block_bytes)
            data = carry + block if carry else block
            if read_error is not None:
                # A .gz cut short, a read that fails: the whole lines read before it are handed
                # out (tagged, and kept in OUTPUT.partial), then the error at the first line not read whole.
                data, carry = data[: data.rfind(b"\n") + 1], b""
            elif block:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # no newline yet: a line longer than a block
                    carry = data
                    continue
                data, carry = data[:cut], data[cut:]
            else:
                carry = b""
            failure: DataError | None = None
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                # The lines before the bad one are good: hand them out first, then the error.
                line, message = locate_utf8_error(data, exc)
                failure = DataError(path, lineno + line, message)
                text = data[: data.rfind(b"\n", 0, exc.start) + 1].decode("utf-8")
            if first:
                first = False
                if text.startswith("\ufeff"):
                    text = text[1:]
            if "\r" in text:
                text = text.replace("\r\n", "\n")
            lines = text.split("\n")
            if block or failure is not None or read_error is not None:
                lines.pop()  # the empty item after the block's last newline: the next block starts there
            if lines:
                yield lineno, lines
            lineno += len(lines)
            if failure is not None:
                raise failure
            if read_error is not None:
                reason = getattr(read_error, "strerror", None) or read_error
                raise DataError(path, lineno + 1, f"cannot read file: {reason}")
            if not block:
                return


def _read_block(handle: BinaryIO, size: int) -> tuple[bytes, BaseException | None]:
    """Up to ``size`` bytes (fewer only at the end), and the error that stopped the reading there,
    if any, with what was read before it: ``read`` of a ``.gz`` cut short raises and loses what it
    had unpacked of that call, up to a whole block; pieces from ``read1`` are kept."""
    parts: list[bytes] = []
    got = 0
    try:
        while got < size:
            piece = handle.read1(size - got)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
    except (OSError, EOFError, zlib.error) as exc:
        return b"".join(parts), exc
    return b"".join(parts), None


def stream_text(path: str | Path) -> Iterator[TokenSequence]:
    """One text per line, tokenised with offsets (as ``read_text``): empty lines are empty
    sequences, so that answer ``n`` is line ``n``; nothing after a final newline."""
    pending: tuple[int, str] | None = None
    try:
        for numbered in numbered_lines(path):
            if pending is not None:
                yield _text_sequence(*pending)
            pending = numbered
    except DataError:
        if pending is not None:  # a line came after it (the bad one): it is a text, even empty
            yield _text_sequence(*pending)
        raise
    if pending is not None and pending[1]:
        yield _text_sequence(*pending)


def _text_sequence(lineno: int, line: str) -> TokenSequence:
    tokens, offsets = tokenize(line)
    return TokenSequence(tokens, offsets=offsets, text=line, line=lineno)


def stream_conll(path: str | Path, labelled: bool = True) -> Iterator[TokenSequence]:
    """The sequences ``read_conll`` would read, one at a time."""
    return ConllParser(path, labelled).sequences(numbered_lines(path))


def stream_grobid(path: str | Path, labelled: bool = True, n_features: int | None = None) -> Iterator[TokenSequence]:
    """The sequences ``read_grobid`` would read, one at a time."""
    return GrobidParser(path, labelled, n_features).sequences(numbered_lines(path))


def stream_labelled(path: str | Path, format: str | None = None) -> tuple[str, Iterator[TokenSequence]]:
    """The format (detected from the first token lines when None) and the sequences
    ``read_labelled`` would read, one at a time."""
    if format is not None and format not in LABELLED_FORMATS:
        choices = ", ".join(repr(name) for name in LABELLED_FORMATS)
        raise ConfigError(f"unknown format {format!r}: choose one of {choices} (or none, to detect it)")
    chosen = format or detect_format_of_lines(numbered_lines(path), path)
    if chosen == "conll":
        return chosen, stream_conll(path)
    return chosen, stream_grobid(path, labelled=True, n_features=None)


@dataclass(frozen=True)
class ChunkSize:
    """How much input one step of a streamed run holds (``--chunk-sequences``, ``--chunk-tokens``):
    a chunk closes at ``sequences`` items (sequences to tag, texts to classify) or ``tokens``
    tokens, whichever comes first. Both bounds matter: a count alone lets a file of long items
    fill memory, tokens alone let one of many empty ones. Within a chunk the model forms its
    length-sorted batches, so a larger chunk pads less and a smaller one holds less."""

    sequences: int = 4096
    tokens: int = 65536

    def cut(self, items: Iterable[Item], size: Callable[[Item], int] = len) -> Iterator[list[Item]]:
        """:func:`chunks` of ``items`` within these bounds; ``size`` counts an item's tokens."""
        return chunks(items, self.sequences, self.tokens, size)


def chunks(sequences: Iterable[Item], max_sequences: int, max_tokens: int,
           size: Callable[[Item], int] = len) -> Iterator[list[Item]]:
    """Consecutive runs of ``sequences``, each closed once it holds ``max_sequences`` sequences or
    ``max_tokens`` tokens (and at least two sequences), in input order. ``size``: a sequence's
    tokens (its ``len``, or for another view of a sequence, such as
    :mod:`textorch.data.row_chunks`' spans of lines or a text to classify, what counts them).

    The one chunk rule of every streamed run: tagging, the GROBID row path and classification.
    A chunk never holds a single sequence unless the input has only one: a network call of one
    sequence takes another kernel path, whose scores may differ in the last bit from the same
    sequence's in a batch, so a lone last sequence joins the chunk before it. For that a full
    chunk is handed out once two more sequences have been read.
    """
    if max_sequences < 2 or max_tokens < 1:
        raise ConfigError(f"a chunk holds at least 2 sequences and 1 token (got {max_sequences}, {max_tokens})")
    held: list[Item] | None = None
    chunk: list[Item] = []
    tokens = 0
    for sequence in sequences:
        chunk.append(sequence)
        tokens += size(sequence)
        if len(chunk) < 2:
            continue
        if held is not None:
            yield held
            held = None
        if len(chunk) >= max_sequences or tokens >= max_tokens:
            held, chunk, tokens = chunk, [], 0
    if held is not None:
        held.extend(chunk)
        yield held
    elif chunk:
        yield chunk


def until_error(items: Iterable[Item], failure: list[TextorchError]) -> Iterator[Item]:
    """``items`` until one cannot be read; the error is kept in ``failure``, so that a streamed
    run can finish what it read before it (and keep it as ``OUTPUT.partial``)."""
    try:
        yield from items
    except TextorchError as exc:
        failure.append(exc)
