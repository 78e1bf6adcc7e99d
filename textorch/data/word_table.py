"""An in-memory table of the word vectors a run actually needs.

The model directory never stores the embedding matrix of the whole vocabulary (it would make
a 2 MB tagger weigh hundreds of MB). Instead each run gathers the vectors of the words it sees
from the embeddings store once, into this growing table; batches then gather rows by index.
"""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np


class VectorSource(Protocol):
    dim: int

    def lookup(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]: ...


class WordTable:
    """Row 0 is the all-zero padding vector; each distinct word gets one row, looked up once.

    Rows live in one array that doubles when full, so a stream of calls that keeps meeting new
    words costs amortised constant time per word (re-joining every block on each new word
    made an endless stream quadratic). :meth:`reset_if_larger` bounds its memory. A lock keeps
    the rows consistent when several threads tag with one model (two calls meeting new words
    at once must not be given the same rows).
    """

    def __init__(self, source: VectorSource) -> None:
        self.source = source
        self.dim = source.dim
        self._rows: dict[str, int] = {}
        self._store = np.zeros((1024, self.dim), dtype=np.float32)
        self._size = 1
        self.found = 0
        self.missing = 0
        self._lock = threading.Lock()

    def index(self, words: list[str]) -> np.ndarray:
        """Row ids for ``words``, fetching vectors of words not seen before in one lookup."""
        with self._lock:
            return self._index(words)

    def _index(self, words: list[str]) -> np.ndarray:
        rows = self._rows
        new = [w for w in dict.fromkeys(words) if w not in rows]
        if new:
            vectors, found = self.source.lookup(new)
            start = self._size
            self._reserve(start + len(new))
            self._store[start : start + len(new)] = np.asarray(vectors, dtype=np.float32)
            for offset, word in enumerate(new):
                rows[word] = start + offset
            self._size += len(new)
            hits = int(np.count_nonzero(found))
            self.found += hits
            self.missing += len(new) - hits
        return np.fromiter(map(rows.__getitem__, words), dtype=np.int64, count=len(words))

    def _reserve(self, size: int) -> None:
        if size > len(self._store):
            grown = np.zeros((max(size, 2 * len(self._store)), self.dim), dtype=np.float32)
            grown[: self._size] = self._store[: self._size]
            self._store = grown

    @property
    def matrix(self) -> np.ndarray:
        with self._lock:
            return self._store[: self._size]

    def __len__(self) -> int:
        """Rows in use, the padding row included."""
        return self._size

    @property
    def nbytes(self) -> int:
        """Memory of the rows in use."""
        return self._size * self.dim * 4

    def reset_if_larger(self, max_bytes: int) -> bool:
        """Forget every word when the rows take more than ``max_bytes``; row ids handed out
        before are then invalid, so call this only where no encoded data is kept (between two
        independent tagging calls)."""
        with self._lock:
            return self._reset_if_larger(max_bytes)

    def _reset_if_larger(self, max_bytes: int) -> bool:
        if self.nbytes <= max_bytes:
            return False
        self._rows = {}
        self._store = np.zeros((1024, self.dim), dtype=np.float32)
        self._size = 1
        return True

    def coverage(self) -> float:
        """Share of distinct words that had a vector: a quick sanity check worth logging."""
        total = self.found + self.missing
        return self.found / total if total else 1.0
