"""Character-encoder outputs kept across tagging calls, for streams of small requests.

A character encoder's output depends on a token's character ids and the encoder's weights
alone. A server tagging one short sequence per request (GROBID's pattern) meets the same
tokens over and over, yet each call ran the character BiLSTM again: two recurrent calls of
150-300 us each, about a third of a one-sentence call. Kept vectors turn that into a lookup.

The cache never serves a vector from other weights: it is tied to the encoder and parameter
objects, the device, each parameter's storage, dtype and version counter (PyTorch bumps it on
in-place changes such as ``load_state_dict``), and the count of optimizer steps taken in the
process (the fused Adam step changes weights without bumping version counters), and to the
autocast state the vectors were computed under (``--precision bf16`` vectors never serve an fp32
call, nor the reverse). It is used in eval mode only.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from textorch.inference_precision import autocast_state
from textorch.models.embedders import encode_token_types

MAX_ENTRIES = 100_000
"""Distinct tokens kept: at most about 30 MB with DeLFT's 50-wide character BiLSTM (20 MB of
vectors, the rest keys). Past this the cache starts anew, so an endless stream of new tokens
cannot grow it for ever."""


class TokenVectorCache:
    """Maps a token's character ids to the encoder's output for it, across calls."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._rows: dict[bytes, int] = {}
        self._matrix: torch.Tensor | None = None
        self._source: tuple | None = None  # (encoder, parameters, _state, device, autocast), held strongly
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        self._rows.clear()
        self._matrix = None

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
        if not self._computed_by(encoder, device):
            self.clear()
            params = tuple(encoder.parameters())
            self._source = (encoder, params, _state(params), str(device), autocast_state(device))
        widths = np.count_nonzero(table, axis=1)
        keys = [row[:width].tobytes() for row, width in zip(table, widths.tolist())]
        missing = self._missing(keys)
        if missing and len(self._rows) + len(missing) > self.max_entries:
            self.clear()  # memory stays bounded; this call's tokens come back at once
            missing = self._missing(keys)
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        if missing:
            fresh = encode_token_types(encoder, torch.from_numpy(table[list(missing.values())]).to(device))
            self._append(fresh, list(missing))
        rows = self._rows
        index = torch.tensor([rows[key] for key in keys], dtype=torch.long, device=self._matrix.device)
        return self._matrix.index_select(0, index)

    def _missing(self, keys: list[bytes]) -> dict[bytes, int]:
        """First position of each key not cached yet. Two token strings can share character
        ids (unknown characters, cut-off tokens), and then share one row."""
        rows = self._rows
        missing: dict[bytes, int] = {}
        for position, key in enumerate(keys):
            if key not in rows and key not in missing:
                missing[key] = position
        return missing

    def _append(self, fresh: torch.Tensor, keys: list[bytes]) -> None:
        """Add rows, doubling the matrix when full (amortised O(1) per token) up to the bound."""
        used = len(self._rows)
        needed = used + len(keys)
        if self._matrix is None or needed > self._matrix.shape[0]:
            capacity = max(needed, min(max(1024, 2 * needed), self.max_entries))
            grown = fresh.new_empty((capacity, fresh.shape[1]))
            if self._matrix is not None:
                grown[:used] = self._matrix[:used]
            self._matrix = grown
        self._matrix[used : used + len(keys)] = fresh
        for offset, key in enumerate(keys):
            self._rows[key] = used + offset

    def _computed_by(self, encoder: nn.Module, device: torch.device | str) -> bool:
        """Whether the cached vectors came from these very weights: the same encoder and
        parameter objects (held, so their ids cannot be reused), unchanged since, same device,
        same autocast state."""
        if self._source is None:
            return False
        source, params, state, source_device, source_autocast = self._source
        if source is not encoder or source_device != str(device) or source_autocast != autocast_state(device):
            return False
        current = tuple(encoder.parameters())
        return (len(current) == len(params) and all(a is b for a, b in zip(current, params))
                and _state(current) == state)


def _state(params: tuple[torch.Tensor, ...]) -> tuple:
    """What the weights' values are known by: optimizer steps taken in this process, and each
    parameter's storage, dtype and in-place version counter."""
    return (_optimizer_steps, tuple((p.data_ptr(), p.dtype, p._version) for p in params))


_optimizer_steps = 0


def _count_step(optimizer, args, kwargs) -> None:
    global _optimizer_steps
    _optimizer_steps += 1


# Every torch optimizer's step, whoever runs it, empties every cache (an integer compare per
# call): version counters alone miss the fused Adam step, which leaves them unchanged.
register_optimizer_step_post_hook(_count_step)
