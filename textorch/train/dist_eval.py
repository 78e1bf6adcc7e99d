"""Evaluation and prediction split across processes, with results equal to one process's.

Two rules make a multi-process result identical to a single-process one:

* Work is split by whole inference batches, dealt round-robin (batch ``j`` to rank
  ``j % world_size``), from the same length-sorted batch list a single process would use: each
  sequence is decoded in exactly the same batch as on one device, so even the floating-point
  scores match, and no sequence is decoded twice (no sampler padding to discount).
* Metrics are reduced as *counts*: each process counts its own sequences, one all-reduce sums
  the count vectors over a label list every process derives from the same data, and scores are
  computed once from the sums.

These functions are task-agnostic: sequence labelling passes ``EntityCounts``, classification
any counts object with ``to_tensor(labels)`` / ``from_tensor(tensor, labels)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import torch

from textorch.train.dist import DistContext

T = TypeVar("T")
C = TypeVar("C", bound="ReducibleCounts")


class ReducibleCounts(Protocol):
    def to_tensor(self, labels: Sequence[str]) -> torch.Tensor: ...

    @classmethod
    def from_tensor(cls, t: torch.Tensor, labels: Sequence[str]): ...


def my_batches(batches: list[list[int]], ctx: DistContext) -> list[list[int]]:
    """This process's share of an inference batch list: every ``world_size``-th batch.

    Round-robin rather than contiguous, since the list is sorted by length: contiguous parts
    would give the last process all the long sequences.
    """
    return batches[ctx.rank :: ctx.world_size]


def place(pairs: Iterable[tuple[int, T]], n_items: int) -> list[T | None]:
    """``(index, result)`` pairs as a list in input order; None where no pair was given."""
    results: list[T | None] = [None] * n_items
    for index, value in pairs:
        results[index] = value
    return results


def gather_in_order(pairs: list[tuple[int, T]], n_items: int, ctx: DistContext) -> list[T | None]:
    """Every process's ``(index, result)`` pairs, merged into one list in input order.

    All processes receive the complete list (one ``all_gather_object``), so the command
    behaves the same whichever rank writes the output.
    """
    merged: list[tuple[int, T]] = []
    for part in ctx.all_gather_objects(pairs):
        merged.extend(part)
    return place(merged, n_items)


def predict_in_parallel(
    batches: list[list[int]], decode: Callable[[list[int]], list[T]], n_items: int, ctx: DistContext
) -> list[T | None]:
    """Run ``decode`` on this process's batches; every item's result, in input order.

    ``batches`` hold positions in ``0 .. n_items-1`` (each at most once); ``decode(indices)``
    returns one result per index. Items in no batch (empty inputs, say) are None.
    """
    local: list[tuple[int, T]] = []
    for indices in my_batches(batches, ctx):
        local.extend(zip(indices, decode(indices)))
    return gather_in_order(local, n_items, ctx)


def reduce_counts(counts: C, labels: Sequence[str], ctx: DistContext) -> C:
    """Counts summed over all processes (one all-reduce); ``counts`` itself with one process.

    ``labels`` must be the same list, in the same order, on every process, and contain every
    label any process counted (``to_tensor`` refuses a counted label missing from it).
    """
    if not ctx.enabled:
        return counts
    device = _collective_device()
    summed = ctx.all_reduce_sum(counts.to_tensor(labels).to(device))
    return type(counts).from_tensor(summed.cpu(), labels)


def agreed_labels(*label_sources: Iterable[str]) -> list[str]:
    """One sorted label list from sources every process holds in full.

    Pass the model's label vocabulary *and* the labels of the whole gold data (not of a
    shard): gold labels the model never saw in training are still counted (as false
    negatives), so they must have a slot in the reduced vector.
    """
    labels: set[str] = set()
    for source in label_sources:
        labels.update(source)
    return sorted(labels)


def _collective_device() -> torch.device:
    """NCCL reduces CUDA tensors only; gloo CPU tensors."""
    import torch.distributed as torch_dist

    if torch_dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
