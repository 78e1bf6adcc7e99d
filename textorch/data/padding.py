"""Padding the arrays of encoded sequences into ``(batch, length, ...)`` arrays, in NumPy alone.

Shared by the PyTorch batches (:func:`textorch.data.batching.collate`) and the ONNX Runtime
tagger (:mod:`textorch.tagging.onnx_tagger`), which imports no torch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from textorch.data.encoding import CallArrays, EncodedSequence

Padder = Callable[..., np.ndarray]
"""``pad(name, fill=0)``: the batch's ``(B, L, ...)`` array of the sequences' array ``name``."""


def _gatherer(items: list[EncodedSequence], mask: np.ndarray) -> Padder | None:
    """A :data:`Padder` that gathers from the arrays of the one ``encode_many`` call all ``items``
    come from (one index for every array), or None when they come from several calls."""
    call = items[0].call
    if call is None or any(item.call is not call for item in items):
        return None
    return call_padder(call, np.fromiter([item.start for item in items], dtype=np.int64, count=len(items)), mask)


def call_padder(call: CallArrays, starts: np.ndarray, mask: np.ndarray) -> Padder:
    """A :data:`Padder` of the batch whose sequence ``b`` is the rows of ``call``'s arrays from
    ``starts[b]`` on, ``mask[b].sum()`` of them: one gather per array."""
    index = starts[:, None] + np.arange(mask.shape[1])
    padding = None if mask.all() else ~mask
    if padding is not None:
        index[padding] = 0  # a valid row, overwritten below

    def gathered(name: str, fill: int = 0) -> np.ndarray:
        out = np.take(getattr(call, name), index, axis=0)
        if padding is not None:
            out[padding] = fill
        return out

    return gathered


def _padder(items: list[EncodedSequence], mask: np.ndarray) -> Padder:
    """A :data:`Padder` that concatenates the sequences' own arrays."""
    return lambda name, fill=0: padded([getattr(item, name) for item in items], mask, fill)


def padded(arrays: list[np.ndarray], mask: np.ndarray, fill: int = 0) -> np.ndarray:
    """``(B, L, ...)`` int64: row ``b`` holds ``arrays[b]`` (of length ``mask[b].sum()``), then
    ``fill``. One concatenation and one masked copy, where a slice copy per sequence and array
    pays a NumPy call per sequence, which adds up over a file."""
    out = np.full(mask.shape + arrays[0].shape[1:], fill, dtype=np.int64)
    out[mask] = np.concatenate(arrays)
    return out


def batch_padder(items: list[EncodedSequence], mask: np.ndarray) -> Padder:
    """The :data:`Padder` of a batch of ``items`` (``mask``: its positions): a gather from their
    ``encode_many`` call's arrays when they share one, else a concatenation of their own."""
    return _gatherer(items, mask) or _padder(items, mask)
