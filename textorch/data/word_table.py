"""An in-memory table of the word vectors a run actually needs.

The model directory never stores the embedding matrix of the whole vocabulary (it would make
a 2 MB tagger weigh hundreds of MB). Instead each run gathers the vectors of the words it sees
from the embeddings store once, into this growing table; batches then gather rows by index.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class VectorSource(Protocol):
    dim: int

    def lookup(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]: ...


class WordTable:
    """Row 0 is the all-zero padding vector; each distinct word gets one row, looked up once."""

    def __init__(self, source: VectorSource) -> None:
        self.source = source
        self.dim = source.dim
        self._rows: dict[str, int] = {}
        self._blocks: list[np.ndarray] = [np.zeros((1, self.dim), dtype=np.float32)]
        self._matrix: np.ndarray | None = None
        self.found = 0
        self.missing = 0

    def index(self, words: list[str]) -> np.ndarray:
        """Row ids for ``words``, fetching vectors of words not seen before in one lookup."""
        rows = self._rows
        new = [w for w in dict.fromkeys(words) if w not in rows]
        if new:
            vectors, found = self.source.lookup(new)
            start = len(rows) + 1
            for offset, word in enumerate(new):
                rows[word] = start + offset
            self._blocks.append(np.asarray(vectors, dtype=np.float32))
            self._matrix = None
            hits = int(np.count_nonzero(found))
            self.found += hits
            self.missing += len(new) - hits
        return np.fromiter((rows[w] for w in words), dtype=np.int64, count=len(words))

    @property
    def matrix(self) -> np.ndarray:
        if self._matrix is None:
            self._matrix = np.concatenate(self._blocks, axis=0)
            self._blocks = [self._matrix]
        return self._matrix

    def coverage(self) -> float:
        """Share of distinct words that had a vector: a quick sanity check worth logging."""
        total = self.found + self.missing
        return self.found / total if total else 1.0
