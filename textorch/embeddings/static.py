"""The user-facing ``StaticEmbeddings``: word-to-vector lookups served from the LMDB cache.

The files themselves (formats, parsing rules, fingerprints) are read by
:mod:`textorch.embeddings.vector_files`; this module opens a file or registry name through the
cache and answers lookups.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from textorch.embeddings.cache import VectorStore, cache_path, embeddings_cache_dir, ensure_cache, resolve_cache_dir
from textorch.embeddings.registry import resolve_spec
from textorch.embeddings.vector_files import FileFormat, VectorFileReader, fingerprint_file, sniff_format
from textorch.errors import ConfigError

__all__ = ["FileFormat", "StaticEmbeddings", "VectorFileReader", "fingerprint_file", "open_embeddings", "sniff_format"]


class StaticEmbeddings:
    """Word-to-vector lookups for a model's embedding layer, served from the LMDB cache.

    Open with ``open_embeddings``. Repeated words (most of any corpus) are answered from a
    bounded in-process memo, so the cache is touched mostly for rare words.
    """

    def __init__(
        self, name: str, path: Path, store: VectorStore, memo_bytes: int = 32 << 20
    ) -> None:
        self.name = name
        self.path = path
        self._store = store
        self.dim = int(store.meta["dim"])
        self.fingerprint = str(store.meta["fingerprint"])
        self.size = int(store.meta["size"])
        self._memo: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self._memo_max = max(1024, memo_bytes // (4 * self.dim))

    def lookup(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors (n, dim) float32 and a found mask; exact match, then lower case, else zeros.

        The lower-case fallback serves cased text with uncased vectors (GloVe 6B) while
        keeping cased vectors (GloVe 840B) exact where they have the word.
        """
        vectors = np.zeros((len(words), self.dim), dtype=np.float32)
        found = np.zeros(len(words), dtype=bool)
        unseen = [w for w in dict.fromkeys(words) if w not in self._memo]
        self._fetch(unseen)
        for row, word in enumerate(words):
            vector = self._memo_get(word)
            if vector is not None:
                vectors[row] = vector
                found[row] = True
        self._trim_memo()
        return vectors, found

    def lookup_exact(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`lookup` without the lower-case fallback (nor the memo, which holds its answers):
        for models whose training looked words up that way (DeLFT's)."""
        vectors = np.zeros((len(words), self.dim), dtype=np.float32)
        found = np.zeros(len(words), dtype=bool)
        keys = [(w.encode("utf-8", "surrogatepass"),) for w in words]
        for row, raw in enumerate(self._store.get_first(keys)):
            if raw is not None:
                vectors[row] = np.frombuffer(raw, dtype="<f4")
                found[row] = True
        return vectors, found

    def _fetch(self, words: list[str]) -> None:
        if not words:
            return
        candidates = []
        for word in words:
            lower = word.lower()
            keys = (word, lower) if lower != word else (word,)
            candidates.append(tuple(k.encode("utf-8", "surrogatepass") for k in keys))
        for word, raw in zip(words, self._store.get_first(candidates)):
            self._memo[word] = None if raw is None else np.frombuffer(raw, dtype="<f4")

    def _memo_get(self, word: str) -> np.ndarray | None:
        self._memo.move_to_end(word)
        return self._memo[word]

    def _trim_memo(self) -> None:
        while len(self._memo) > self._memo_max:
            self._memo.popitem(last=False)

    def describe(self) -> dict[str, Any]:
        """What a model records about its vectors, to refuse being loaded with others."""
        return {
            "name": self.name,
            "path": str(self.path),
            "dim": self.dim,
            "fingerprint": self.fingerprint,
        }

    def check_matches(self, desc: dict[str, Any]) -> None:
        """Raise ConfigError when ``desc`` (from a saved model) names other vectors.

        The fingerprint decides, not the name or path: the same file may sit elsewhere on
        another machine, and the same name may point to another file.
        """
        if desc.get("fingerprint") == self.fingerprint and desc.get("dim") == self.dim:
            return
        raise ConfigError(
            f"the model was trained with embeddings {desc.get('name')!r} "
            f"({desc.get('path')}, dim {desc.get('dim')}, fingerprint {desc.get('fingerprint')}) "
            f"but {self.name!r} ({self.path}, dim {self.dim}, fingerprint {self.fingerprint}) "
            f"was given; use the vectors the model was trained with"
        )

    def close(self) -> None:
        self._store.close()
        self._memo.clear()

    def __enter__(self) -> StaticEmbeddings:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StaticEmbeddings({self.name!r}, dim={self.dim}, size={self.size})"


def open_embeddings(
    spec: str,
    registry: str | Path | None = None,
    cache_dir: str | Path | None = None,
) -> StaticEmbeddings | None:
    """Open ``spec`` ("none", a vectors file, or a registry name), building its cache once.

    The first line is read before anything else so that a registry entry with the wrong
    ``dim`` fails at once, not after minutes of caching.
    """
    if spec.strip().lower() == "none":
        return None
    source = resolve_spec(spec, registry)
    fmt = sniff_format(source.path)
    if source.dim is not None and source.dim != fmt.dim:
        raise ConfigError(
            f"embeddings {source.name!r}: the registry says dim {source.dim} but "
            f"{source.path} has dim {fmt.dim}"
        )
    fingerprint = fingerprint_file(source.path)
    # a cache built where earlier releases put it (directly under a $TEXTORCH_CACHE_DIR or
    # --cache-dir) is used where it is rather than built again
    earlier = cache_path(resolve_cache_dir(cache_dir), fingerprint)
    location = earlier if earlier.is_dir() else ensure_cache(
        source.path,
        fmt,
        fingerprint,
        embeddings_cache_dir(cache_dir),
        lambda: VectorFileReader(source.path, fmt),
    )
    return StaticEmbeddings(source.name, source.path, VectorStore(location))
