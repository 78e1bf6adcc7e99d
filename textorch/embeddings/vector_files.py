"""Word-vector files: their formats, fingerprints and the streaming reader the LMDB cache is filled from.

Four formats are read, each optionally gzipped: GloVe text (no header), word2vec text and
fastText ``.vec`` (a ``count dim`` header line, then as GloVe) and word2vec binary. Files are
streamed once, record by record, into an LMDB cache (see ``cache.py``); after that every open
is a memory map and no text is parsed again.

Parsing rules, chosen for the real files in circulation:

* Fields are split on the ASCII space only, so words holding other Unicode whitespace (GloVe
  840B has some) stay whole. Trailing spaces are ignored (fastText ``.vec`` lines end in one).
* A line with more than ``dim + 1`` fields is a word containing spaces (GloVe 840B has
  ``". . ."`` and a few others): the word is all the leading fields joined by one space.
* A line with fewer fields, or a non-number among the last ``dim`` fields, is a
  ``DataError(path, line, ...)``: silently skipping it would hide a truncated or mis-typed
  file, and no widely used file needs that leniency.
* ``dim`` comes from the header, else from the first line, which must hold a one-token word
  (true of every published GloVe, word2vec and fastText file).
* Words are stored and matched as raw bytes; a lookup encodes its word as UTF-8, so a word
  that is not valid UTF-8 in the file is kept but cannot be matched.
* For word2vec binary files the ``line`` of an error is the record number (header = 1).
"""

from __future__ import annotations

import gzip
import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from textorch.errors import DataError

FINGERPRINT_SPAN = 1 << 20
"""Bytes hashed at each end of the file for its fingerprint."""

_READ_CHUNK = 1 << 20
_MAX_BINARY_WORD = 1 << 16


def fingerprint_file(path: str | Path) -> str:
    """Identify a vectors file by sha256 over its size, first MiB and last MiB.

    A full hash of GloVe 840B (5.6 GB) costs tens of seconds on every open, which defeats a
    cache meant to open in milliseconds. Size plus both ends catches what happens in practice
    (another release, a truncated download, appended or re-sorted vectors, another dimension)
    and reads 2 MiB whatever the file size. It misses only a same-size edit confined to the
    middle of the file, which nobody does to published vectors. The modification time is left
    out on purpose: copying a file to another machine must keep its fingerprint, since models
    record it to detect being loaded with other vectors.
    """
    path = Path(path)
    size = path.stat().st_size
    digest = hashlib.sha256()
    digest.update(b"textorch-vectors-fp1\0")
    digest.update(size.to_bytes(8, "little"))
    with path.open("rb") as handle:
        if size <= 2 * FINGERPRINT_SPAN:
            digest.update(handle.read())
        else:
            digest.update(handle.read(FINGERPRINT_SPAN))
            handle.seek(size - FINGERPRINT_SPAN)
            digest.update(handle.read(FINGERPRINT_SPAN))
    return digest.hexdigest()


@dataclass(frozen=True)
class FileFormat:
    """What a first look at a vectors file tells; enough to size and label the cache build."""

    binary: bool
    gzipped: bool
    header: bool
    dim: int
    count: int | None
    """Number of vectors announced by the header; None without a header."""

    @property
    def label(self) -> str:
        kind = "word2vec-binary" if self.binary else ("word2vec-text" if self.header else "glove")
        return kind + ("+gzip" if self.gzipped else "")


def _is_gzipped(path: Path) -> bool:
    """Trust the magic bytes over the suffix, so a mis-named file still reads."""
    with path.open("rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def is_binary_name(path: Path) -> bool:
    """Binary word2vec cannot be told from text by content cheaply; the suffix decides."""
    name = path.name.lower()
    return name.endswith(".bin") or name.endswith(".bin.gz")


def _open_stream(path: Path, gzipped: bool) -> tuple[BinaryIO, BinaryIO]:
    """Return (raw file, decoded stream); the raw file's position drives the progress bar."""
    raw = path.open("rb")
    if not gzipped:
        return raw, raw
    return raw, gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]


def _parse_header(line: bytes) -> tuple[int, int] | None:
    fields = line.split()
    if len(fields) != 2:
        return None
    try:
        return int(fields[0]), int(fields[1])
    except ValueError:
        return None


def _split_line(line: bytes) -> list[bytes]:
    return line.rstrip(b"\r\n").rstrip(b" ").split(b" ")


def sniff_format(path: str | Path) -> FileFormat:
    """Read only the first line: cheap enough to run on every open, before any cache lookup."""
    path = Path(path)
    gzipped = _is_gzipped(path)
    binary = is_binary_name(path)
    raw, stream = _open_stream(path, gzipped)
    try:
        first = stream.readline()
    except (OSError, EOFError) as exc:
        raise DataError(path, 1, f"cannot read vectors file: {exc}") from exc
    finally:
        stream.close()
        raw.close()
    if not first.strip():
        raise DataError(path, 1, "empty vectors file (expected a word and its numbers)")
    header = _parse_header(first)
    if binary and header is None:
        raise DataError(
            path,
            1,
            "word2vec binary file must start with a 'count dim' line "
            "(fastText .bin models are not vectors files: use the matching .vec)",
        )
    if header is not None:
        count, dim = header
        if count < 0 or dim <= 0:
            raise DataError(path, 1, f"bad header {first.strip()!r}: need count >= 0, dim > 0")
        return FileFormat(binary, gzipped, True, dim, count)
    fields = _split_line(first)
    if len(fields) < 2:
        raise DataError(path, 1, "expected a word followed by numbers")
    return FileFormat(False, gzipped, False, len(fields) - 1, None)


class VectorFileReader:
    """Stream ``(line, word bytes, float32 little-endian bytes)`` records from a vectors file.

    Nothing beyond one read chunk and one record is held in memory, so multi-GB files stream.
    """

    def __init__(self, path: str | Path, fmt: FileFormat) -> None:
        self.path = Path(path)
        self.fmt = fmt
        self._raw, self._stream = _open_stream(self.path, fmt.gzipped)

    @property
    def position(self) -> int:
        """Bytes consumed from the file on disk (compressed bytes for gzip), for progress."""
        return self._raw.tell()

    def close(self) -> None:
        self._stream.close()
        self._raw.close()

    def __enter__(self) -> VectorFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple[int, bytes, bytes]]:
        try:
            if self.fmt.binary:
                yield from self._iter_binary()
            else:
                yield from self._iter_text()
        except (OSError, EOFError) as exc:  # corrupt gzip stream, unreadable disk block
            raise DataError(self.path, None, f"cannot read vectors file: {exc}") from exc

    def _iter_text(self) -> Iterator[tuple[int, bytes, bytes]]:
        dim = self.fmt.dim
        for lineno, line in enumerate(self._stream, start=1):
            if lineno == 1 and self.fmt.header:
                continue
            fields = _split_line(line)
            if fields == [b""]:
                continue
            if len(fields) < dim + 1:
                raise DataError(
                    self.path,
                    lineno,
                    f"expected a word and {dim} numbers, found {len(fields)} fields",
                )
            try:
                vector = np.array(fields[-dim:], dtype="<f4")
            except ValueError:
                bad = next(f for f in fields[-dim:] if not _is_float(f))
                message = f"expected {dim} numbers after the word, found {bad[:40]!r}"
                raise DataError(self.path, lineno, message) from None
            yield lineno, b" ".join(fields[:-dim]), vector.tobytes()

    def _iter_binary(self) -> Iterator[tuple[int, bytes, bytes]]:
        self._stream.readline()
        chunks = _ChunkReader(self._stream)
        nbytes = 4 * self.fmt.dim
        for index in range(self.fmt.count or 0):
            record = index + 2
            word = chunks.read_until(b" ", _MAX_BINARY_WORD)
            if word is None:
                message = (
                    f"no word found for vector {index + 1} of the {self.fmt.count} announced "
                    "(file ends early or is not word2vec binary)"
                )
                raise DataError(self.path, record, message)
            word = word.lstrip(b"\r\n")  # the newline most writers put after each vector
            vector = chunks.read_exact(nbytes)
            if vector is None:
                message = f"truncated vector for {word[:40]!r}: expected {nbytes} bytes"
                raise DataError(self.path, record, message)
            yield record, word, vector


def _is_float(field: bytes) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


class _ChunkReader:
    """Buffered delimiter/fixed-size reads; byte-at-a-time reads of a gzip stream are slow."""

    def __init__(self, stream: BinaryIO | io.BufferedIOBase) -> None:
        self._stream = stream
        self._buf = b""
        self._pos = 0

    def _fill(self) -> bool:
        chunk = self._stream.read(_READ_CHUNK)
        if not chunk:
            return False
        self._buf = self._buf[self._pos :] + chunk
        self._pos = 0
        return True

    def read_until(self, delimiter: bytes, limit: int) -> bytes | None:
        """Bytes up to (not including) ``delimiter``, which is consumed; None at end of file."""
        while True:
            end = self._buf.find(delimiter, self._pos)
            if end >= 0:
                out = self._buf[self._pos : end]
                self._pos = end + len(delimiter)
                return out
            if len(self._buf) - self._pos > limit or not self._fill():
                return None

    def read_exact(self, size: int) -> bytes | None:
        while len(self._buf) - self._pos < size:
            if not self._fill():
                return None
        out = self._buf[self._pos : self._pos + size]
        self._pos += size
        return out
