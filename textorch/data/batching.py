"""Padding encoded sequences into batches, and length-bucketed batch orders.

Batches of similar lengths waste little work on padding; the order is derived from
``(seed, epoch)`` alone so that every process of a distributed run computes the same global
batches without communicating, and each takes its own slice.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from textorch.data.encoding import EncodedSequence
from textorch.data.word_table import WordTable


@dataclass
class Batch:
    """Tensors of one padded batch; ``indices`` are positions in the source list."""

    mask: torch.Tensor  # (B, L) bool
    char_ids: torch.Tensor  # (B, L, C)
    casing_ids: torch.Tensor  # (B, L)
    feature_ids: torch.Tensor | None  # (B, L, F)
    word_vectors: torch.Tensor | None  # (B, L, D)
    label_ids: torch.Tensor | None  # (B, L)
    lengths: torch.Tensor  # (B,) on CPU, for packing
    indices: list[int]

    def to(self, device: torch.device | str) -> "Batch":
        moved = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) and f.name != "lengths":
                value = value.to(device, non_blocking=True)
            moved[f.name] = value
        return Batch(**moved)

    def __len__(self) -> int:
        return len(self.indices)


def collate(
    encoded: list[EncodedSequence], indices: list[int], word_table: WordTable | None = None
) -> Batch:
    """Pad a list of encoded sequences (all of length >= 1) into one :class:`Batch`."""
    items = [encoded[i] for i in indices]
    batch_size = len(items)
    max_len = max(len(item) for item in items)
    max_chars = max(item.char_ids.shape[1] for item in items)
    lengths = np.fromiter((len(item) for item in items), dtype=np.int64, count=batch_size)
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    char_ids = np.zeros((batch_size, max_len, max_chars), dtype=np.int64)
    casing_ids = np.zeros((batch_size, max_len), dtype=np.int64)
    first = items[0]
    feature_ids = (
        np.zeros((batch_size, max_len, first.feature_ids.shape[1]), dtype=np.int64)
        if first.feature_ids is not None
        else None
    )
    label_ids = np.zeros((batch_size, max_len), dtype=np.int64) if first.label_ids is not None else None
    word_ids = np.zeros((batch_size, max_len), dtype=np.int64) if first.word_ids is not None else None
    for row, item in enumerate(items):
        n, c = item.char_ids.shape
        char_ids[row, :n, :c] = item.char_ids
        casing_ids[row, :n] = item.casing_ids
        if feature_ids is not None:
            feature_ids[row, :n] = item.feature_ids
        if label_ids is not None:
            label_ids[row, :n] = item.label_ids
        if word_ids is not None:
            word_ids[row, :n] = item.word_ids
    word_vectors = None
    if word_ids is not None and word_table is not None:
        word_vectors = torch.from_numpy(word_table.matrix[word_ids])
    return Batch(
        mask=torch.from_numpy(mask),
        char_ids=torch.from_numpy(char_ids),
        casing_ids=torch.from_numpy(casing_ids),
        feature_ids=None if feature_ids is None else torch.from_numpy(feature_ids),
        word_vectors=word_vectors,
        label_ids=None if label_ids is None else torch.from_numpy(label_ids),
        lengths=torch.from_numpy(lengths),
        indices=list(indices),
    )


def bucketed_batches(
    lengths: list[int] | np.ndarray, batch_size: int, seed: int, epoch: int, bucket_factor: int = 50
) -> list[list[int]]:
    """Global batches for one epoch: shuffled, then sorted by length within large buckets.

    Buckets of ``bucket_factor`` batches keep enough randomness for SGD while batching
    sequences of similar length; the batch order is shuffled again afterwards.
    """
    rng = np.random.default_rng([seed, epoch])
    lengths = np.asarray(lengths)
    order = rng.permutation(len(lengths))
    bucket = batch_size * bucket_factor
    batches: list[list[int]] = []
    for start in range(0, len(order), bucket):
        chunk = order[start : start + bucket]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size].tolist() for i in range(0, len(chunk), batch_size))
    batch_order = rng.permutation(len(batches))
    return [batches[i] for i in batch_order]


def sorted_batches(lengths: list[int] | np.ndarray, batch_size: int) -> list[list[int]]:
    """Inference batches: sorted by length so padding is minimal; callers restore the order."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size].tolist() for i in range(0, len(order), batch_size)]


def shard(batch: list[int], rank: int, world_size: int) -> list[int]:
    """This process's part of a global batch: contiguous, sizes differing by at most one.

    With 10 sequences on 4 processes the parts have 3, 3, 2, 2 sequences: the first
    ``len % world_size`` ranks take one more.
    """
    base, extra = divmod(len(batch), world_size)
    start = rank * base + min(rank, extra)
    return batch[start : start + base + (1 if rank < extra else 0)]
