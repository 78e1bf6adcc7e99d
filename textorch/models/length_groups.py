"""Rows of a batch run as a few groups of similar length, each padded to its own longest row.

Length buckets keep batches partly random, so one batch can mix a very long sequence with many
short ones, and character tables mix tokens of 1 and of 30 characters: padded as one block, a
recurrent layer would run every row for the longest row's steps. A cost model says where
cutting the rows into groups pays (:func:`length_groups`), and :func:`in_length_groups` runs
any per-row computation group by group (recurrent layers, transformer windows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from textorch.models.costs import GroupCosts
from textorch.models.rows import inverse_permutation, permute_rows


def length_groups(lengths: torch.Tensor, costs: GroupCosts) -> list[torch.Tensor] | None:
    """Rows in at most ``costs.max_groups`` groups of similar lengths, each to be run padded to
    its own longest row, when ``costs`` says that pays; None when one block is cheapest.

    Length buckets keep batches partly random (better models, see ``TrainConfig.bucket_batches``),
    so a batch can mix a 900-token GROBID header with 31 short ones: padded as one block, the
    BiLSTM would run 32 rows for 900 steps instead of one. Groups are cut between distinct
    lengths only (a cut inside equal lengths never pays), so the exact search below is over
    at most a few dozen values however many rows there are: dynamic programming over
    ``best[k][j]``, the cheapest way to run the ``j`` shortest lengths in ``k`` groups.
    """
    sizes = lengths.detach().cpu().numpy()
    if len(sizes) < 2 or _one_block_is_cheapest(sizes, costs):
        return None
    order = np.argsort(sizes, kind="stable")
    ordered = sizes[order]
    # rows_before[j]: rows shorter than values[j], the j-th distinct length (from the one sort)
    rows_before = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1, [len(ordered)]])
    values = ordered[rows_before[:-1]]
    if len(values) < 2:
        return None
    # cost[i, j]: one group holding the lengths values[i:j] (rows rows_before[i]..rows_before[j])
    top = values.astype(np.float64)[None, :]
    n = rows_before[None, 1:] - rows_before[:-1, None]
    cost = np.where(n > 0, top * (n + costs.step_cost_in_rows) + costs.group_cost, np.inf)
    distinct = len(values)
    best = np.full(distinct + 1, np.inf)
    best[0] = 0.0
    choices = []
    totals = []
    for _ in range(costs.max_groups):
        # best_next[j] = min over i < j of best[i] + cost[i, j - 1]
        candidates = best[:-1, None] + cost
        choice = candidates.argmin(axis=0)
        best = np.concatenate([[np.inf], candidates[choice, np.arange(distinct)]])
        choices.append(choice)
        totals.append(best[-1])
    groups = int(np.argmin(totals)) + 1
    if groups == 1:
        return None
    bounds = [distinct]
    for k in range(groups - 1, -1, -1):
        bounds.append(int(choices[k][bounds[-1] - 1]))
    cuts = [int(rows_before[j]) for j in reversed(bounds)]
    order_t = torch.from_numpy(order)
    return [order_t[start:end] for start, end in zip(cuts[:-1], cuts[1:])]


def _one_block_is_cheapest(sizes: np.ndarray, costs: GroupCosts) -> bool:
    """Whether no split can beat one padded block, by a lower bound on any split's cost: every
    row's own length, one step cost for the longest row's group and one for another group
    (whose longest is at least the shortest row), and one group more. Exact (never skips a
    cheaper split; on a tie the search keeps one block too), and most tagging batches and
    character tables stop here, sparing the search, a visible share of a small file's pass."""
    longest, shortest = int(sizes.max()), int(sizes.min())
    one_block = longest * (len(sizes) + costs.step_cost_in_rows)
    split_at_least = int(sizes.sum()) + costs.step_cost_in_rows * (longest + shortest) + costs.group_cost
    return one_block <= split_at_least


def in_length_groups(
    run: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor | None], lengths: torch.Tensor,
    groups: list[torch.Tensor], steps: int | None = None,
) -> torch.Tensor:
    """``run(*inputs' rows, their lengths)`` on each group of rows (:func:`length_groups`), every
    input cut to the group's longest row (None stays None), the results put back in the batch's
    row order. With ``steps``, each group's ``(rows, time, ...)`` result is first padded with
    zeros back to ``steps`` time steps. Gradients flow through the indexing.

    The one way textorch runs a batch's rows as groups of similar length: recurrent layers
    (training and character encoders) and transformer windows. (Tagging calls cut whole
    batches before this, with :mod:`textorch.models.inference_batches`.)"""
    device = next(x.device for x in inputs if x is not None)
    lengths = lengths.to(device)
    groups = [group.to(device) for group in groups]
    outputs = []
    for group in groups:
        group_lengths = lengths[group]
        width = int(group_lengths.max())
        out = run(*(None if x is None else x.index_select(0, group)[:, :width] for x in inputs), group_lengths)
        if steps is not None:
            out = nn.functional.pad(out, (0, 0) * (out.dim() - 2) + (0, steps - out.shape[1]))
        outputs.append(out)
    order = torch.cat(groups)
    return permute_rows(torch.cat(outputs), inverse_permutation(order), order)
