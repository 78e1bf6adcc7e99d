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
from textorch.data.padding import batch_padder, padded
from textorch.data.word_table import WordTable


@dataclass
class Batch:
    """Tensors of one padded batch; ``indices`` are positions in the source list."""

    mask: torch.Tensor  # (B, L) bool
    char_ids: torch.Tensor  # (B, L, C); (B, L, 0) when char_vectors are given (then nothing reads it)
    casing_ids: torch.Tensor  # (B, L)
    feature_ids: torch.Tensor | None  # (B, L, F)
    word_vectors: torch.Tensor | None  # (B, L, D)
    label_ids: torch.Tensor | None  # (B, L)
    lengths: torch.Tensor  # (B,) on CPU, for packing
    indices: list[int]
    # The distinct tokens of the batch, once each: character ids (U, C), and for each position
    # the row of its token there, -1 at padding. Character encoders run on these rows only.
    char_rows: torch.Tensor | None = None
    char_index: torch.Tensor | None = None
    # At tagging time: the character encoder's output for every token type of the whole call,
    # computed once (see ``token_type_table``), then a row of zeros; ``char_index`` then holds
    # global type ids, and that last row's index at padding.
    char_vectors: torch.Tensor | None = None
    template_rows: torch.Tensor | None = None  # (B, L, templates), 0 at padding

    def to(self, device: torch.device | str) -> "Batch":
        """The same batch (of the same class: subclasses add tensors) on ``device``."""
        return moved_to(self, device)

    def __len__(self) -> int:
        return len(self.indices)


def moved_to(batch, device: torch.device | str):
    """A copy of a batch dataclass with every tensor field on ``device`` (``lengths`` stays on
    the CPU: packing reads it there)."""
    moved = {}
    for f in fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, torch.Tensor) and f.name != "lengths":
            value = value.to(device, non_blocking=True)
        moved[f.name] = value
    return type(batch)(**moved)


def collate(
    encoded: list[EncodedSequence],
    indices: list[int],
    word_table: WordTable | None = None,
    token_vectors: torch.Tensor | None = None,
    char_rows: bool = True,
) -> Batch:
    """Pad a list of encoded sequences (all of length >= 1) into one :class:`Batch`.

    ``token_vectors``: character-encoder outputs indexed by type id, for every type of the
    ``encode_many`` call that made ``encoded`` (tagging), then one row of zeros; the batch then
    points into them, padding at that last row (one row gather builds the batch's vectors).
    ``char_rows=False`` leaves out the distinct-token rows (for runners that read ``char_ids``)."""
    items = [encoded[i] for i in indices]
    batch_size = len(items)
    if batch_size == 1:
        return _one_sequence(items[0], indices, word_table, token_vectors, char_rows)
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=batch_size)
    max_len = int(lengths.max())
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    # With the character vectors of every token type at hand, nothing reads padded characters.
    max_chars = 0 if token_vectors is not None else max(item.char_ids.shape[1] for item in items)
    char_ids = np.zeros((batch_size, max_len, max_chars), dtype=np.int64)
    if max_chars:
        for row, item in enumerate(items):
            char_ids[row, : len(item), : item.char_ids.shape[1]] = item.char_ids
    first = items[0]
    pad = batch_padder(items, mask)
    casing_ids = pad("casing_ids")
    feature_ids = None if first.feature_ids is None else pad("feature_ids")
    label_ids = None if first.label_ids is None else padded([item.label_ids for item in items], mask)
    word_ids = None if first.word_ids is None else pad("word_ids")
    template_rows = None if first.template_rows is None else pad("template_rows")
    if token_vectors is not None:
        type_ids = pad("type_ids", token_vectors.shape[0] - 1)  # padding: the row of zeros
        rows, char_index = None, torch.from_numpy(type_ids)
    elif char_rows:
        rows, char_index = _distinct_tokens(items, char_ids, mask)
    else:
        rows, char_index = None, None
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
        char_rows=rows,
        char_index=char_index,
        char_vectors=token_vectors,
        template_rows=None if template_rows is None else torch.from_numpy(template_rows),
    )


def _one_sequence(
    item: EncodedSequence, indices: list[int], word_table: WordTable | None, token_vectors: torch.Tensor | None,
    char_rows: bool,
) -> Batch:
    """:func:`collate` of one sequence: nothing to pad, so the arrays are used as they are
    (about half the cost of a one-sequence call's batch, which GROBID-style streams make)."""
    length = len(item)
    mask = np.ones((1, length), dtype=bool)
    rows = char_index = None
    if token_vectors is not None:
        char_index = torch.from_numpy(item.type_ids[None])
    elif char_rows:
        rows, char_index = _distinct_tokens([item], item.char_ids, mask[0])
        if char_index is not None:
            char_index = char_index[None]

    def tensor(array: np.ndarray | None) -> torch.Tensor | None:
        return None if array is None else torch.from_numpy(array[None])

    word_vectors = None
    if item.word_ids is not None and word_table is not None:
        word_vectors = torch.from_numpy(word_table.matrix[item.word_ids][None])
    return Batch(
        mask=torch.from_numpy(mask), char_ids=tensor(item.char_ids), casing_ids=tensor(item.casing_ids),
        feature_ids=tensor(item.feature_ids), word_vectors=word_vectors, label_ids=tensor(item.label_ids),
        lengths=torch.from_numpy(np.array([length])), indices=list(indices), char_rows=rows, char_index=char_index,
        char_vectors=token_vectors, template_rows=tensor(item.template_rows),
    )


def with_padding_row(token_vectors: torch.Tensor) -> torch.Tensor:
    """``token_vectors`` (one row per token type) and a last row of zeros, the row that padded
    positions point at in a batch made by :func:`collate`."""
    return torch.cat([token_vectors, token_vectors.new_zeros((1, token_vectors.shape[1]))])


def token_type_table(encoded: list[EncodedSequence]) -> np.ndarray | None:
    """Character ids of every token type of the one ``encode_many`` call that made ``encoded``,
    row ``i`` = type ``i``; None when there is no token, or when the sequences come from several
    calls (their type ids then mean different tokens)."""
    present = [item for item in encoded if len(item)]
    if not present:
        return None
    shared = present[0].type_table
    return shared if all(item.type_table is shared for item in present) else None


def _distinct_tokens(
    items: list[EncodedSequence], char_ids: np.ndarray, mask: np.ndarray
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Character rows of the batch's distinct tokens and each position's row (-1 at padding).

    Tokens repeat (a batch of 256 CoNLL sentences has about twice as many tokens as distinct
    ones), and a character encoder's output depends on the token alone, so computing it once
    per distinct token gives the same vectors for less work.
    """
    if token_type_table(items) is None:
        return None, None  # type ids of different encode_many calls: not comparable
    flat_types = np.concatenate([item.type_ids for item in items])
    _, first, inverse = np.unique(flat_types, return_index=True, return_inverse=True)
    index = padded([inverse.reshape(-1)], mask, fill=-1)
    return torch.from_numpy(char_ids[mask][first]), torch.from_numpy(index)


def bucketed_batches(
    lengths: list[int] | np.ndarray, batch_size: int, seed: int, epoch: int,
    bucket_batches: int,
) -> list[list[int]]:
    """Global batches for one epoch: shuffled, then sorted by length within buckets.

    Buckets of ``bucket_batches`` batches trade padding for randomness (see
    ``TrainConfig.bucket_batches``); the batch order is shuffled again afterwards.
    """
    rng = np.random.default_rng([seed, epoch])
    lengths = np.asarray(lengths)
    order = rng.permutation(len(lengths))
    bucket = batch_size * bucket_batches
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
