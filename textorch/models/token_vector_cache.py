"""Character-encoder outputs kept across tagging calls, for streams of small requests.

A character encoder's output depends on a token's character ids and the encoder's weights
alone. A server tagging one short sequence per request (GROBID's pattern) meets the same
tokens over and over, yet each call ran the character BiLSTM again, a large share of a
one-sentence call. Kept vectors turn that into a lookup (docs/performance.md).

The cache never serves a vector from other weights: it is tied to the encoder, the device, and
a snapshot of the encoder's parameters (:class:`textorch.models.weight_state.WeightSnapshot`:
the same objects holding the same bits, however they were written). Vectors
computed under autocast (``--precision bf16``) are kept apart from fp32 ones, one store per
autocast state, so neither ever serves the other and calls of both kinds keep their vectors.
It is used in eval mode only. One lock guards the stores: threads tagging with one model share
the cache, and a call that adds rows must not interleave with another's.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from torch import nn

from textorch.runtime.precision import autocast_state
from textorch.models.embedders import encode_token_types
from textorch.models.weight_state import WeightSnapshot

MAX_ENTRIES = 100_000
"""Distinct tokens kept per autocast state: at most about 30 MB with DeLFT's 50-wide character
BiLSTM (20 MB of vectors, the rest keys). Past this a store starts anew, so an endless stream
of new tokens cannot grow it for ever."""


class _Store:
    """The vectors computed under one autocast state: row of each key, and the rows."""

    def __init__(self) -> None:
        self.rows: dict[bytes, int] = {}
        self.matrix: torch.Tensor | None = None


class TokenVectorCache:
    """Maps a token's character ids to the encoder's output for it, across calls."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._stores: dict[tuple, _Store] = {}  # by autocast state
        self._source: tuple[nn.Module, WeightSnapshot, str] | None = None  # encoder (held), weights, device
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return sum(len(store.rows) for store in self._stores.values())

    def clear(self) -> None:
        with self._lock:
            self._stores.clear()

    def vectors(self, encoder: nn.Module, table: np.ndarray, device: torch.device | str) -> torch.Tensor:
        """``encode_token_types(encoder, table)``: ``(N, D)`` vectors of the rows of ``table``
        (character ids, zero-padded), the ones seen before read from the cache."""
        if encoder.training or table.shape[0] == 0:
            return encode_token_types(encoder, torch.from_numpy(table).to(device))
        return self._cached(encoder, table, device)

    @torch.inference_mode()
    def _cached(self, encoder: nn.Module, table: np.ndarray, device: torch.device | str) -> torch.Tensor:
        """Kept vectors carry no autograd history: the matrix is an inference tensor, written in
        place call after call, which PyTorch allows only in inference mode."""
        with self._lock:
            return self._cached_locked(encoder, table, device)

    def _cached_locked(self, encoder: nn.Module, table: np.ndarray, device: torch.device | str) -> torch.Tensor:
        if not self._computed_by(encoder, device):
            self._stores.clear()
            self._source = (encoder, WeightSnapshot(tuple(encoder.parameters())), str(device))
        store = self._stores.setdefault(autocast_state(device), _Store())
        keys = _row_keys(table)
        missing = _missing(store, keys)
        if missing and len(store.rows) + len(missing) > self.max_entries:
            store = self._stores[autocast_state(device)] = _Store()  # bounded; this call's tokens come back at once
            missing = _missing(store, keys)
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        if missing:
            fresh = encode_token_types(encoder, torch.from_numpy(table[list(missing.values())]).to(device))
            self._append(store, fresh, list(missing))
        rows = store.rows
        index = torch.tensor([rows[key] for key in keys], dtype=torch.long, device=store.matrix.device)
        return store.matrix.index_select(0, index)

    def _append(self, store: _Store, fresh: torch.Tensor, keys: list[bytes]) -> None:
        """Add rows, doubling the matrix when full (amortised O(1) per token) up to the bound."""
        used = len(store.rows)
        needed = used + len(keys)
        if store.matrix is None or needed > store.matrix.shape[0]:
            capacity = max(needed, min(max(1024, 2 * needed), self.max_entries))
            grown = fresh.new_empty((capacity, fresh.shape[1]))
            if store.matrix is not None:
                grown[:used] = store.matrix[:used]
            store.matrix = grown
        store.matrix[used : used + len(keys)] = fresh
        for offset, key in enumerate(keys):
            store.rows[key] = used + offset

    def _computed_by(self, encoder: nn.Module, device: torch.device | str) -> bool:
        """Whether the kept vectors came from these very weights: the same encoder (held, so
        its id cannot be reused) and parameter objects holding the same bits, same device."""
        if self._source is None:
            return False
        source, weights, source_device = self._source
        return source is encoder and source_device == str(device) and weights.matches(tuple(encoder.parameters()))


KEY_WIDTH = 32
"""Character ids per key: tables up to this wide (every model's default ``max_char_length`` is
30) give the same key to the same token whatever the call's widest token."""


def _row_keys(table: np.ndarray) -> list[bytes]:
    """One key per row of ``table``: its character ids as int32, zero-padded to ``KEY_WIDTH``,
    all made by one NumPy conversion (a ``tobytes`` per row cost several times more on a whole
    test set). A wider table keeps its width: its keys then differ from a narrower one's
    for the same token, which costs a duplicate row, never a wrong vector."""
    width = max(table.shape[1], KEY_WIDTH)
    padded = np.zeros((table.shape[0], width), dtype=np.int32)
    padded[:, : table.shape[1]] = table
    return padded.view(np.dtype((np.void, 4 * width))).ravel().tolist()


def _missing(store: _Store, keys: list[bytes]) -> dict[bytes, int]:
    """First position of each key not in ``store`` yet. Two token strings can share character
    ids (unknown characters, cut-off tokens), and then share one row."""
    rows = store.rows
    missing: dict[bytes, int] = {}
    for position, key in enumerate(keys):
        if key not in rows and key not in missing:
            missing[key] = position
    return missing
