"""CPU recurrent calls on a few row counts per doubling, so oneDNN builds few kernels.

oneDNN builds (and JIT-compiles) a kernel for every new input shape, and costs more to build
one than to run a small call. Character rows are the distinct tokens of a batch, a new count
nearly every training step; rounded up to a few sizes, the kernels are built once each. Padded
rows are zeros whose outputs are dropped: results are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from textorch.models import costs


def bucketed_rows(rows: int) -> int:
    """``rows`` rounded up to one of four sizes per doubling above ``costs.ONEDNN_ROW_BUCKETS_FROM``."""
    if rows <= costs.ONEDNN_ROW_BUCKETS_FROM:
        return rows
    step = 1 << (rows.bit_length() - 3)
    return -(-rows // step) * step


def in_row_buckets(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, row_dim: int) -> torch.Tensor:
    """``run(x)``, on the CPU with the rows of ``x`` (dimension ``row_dim``) padded with zeros up
    to :func:`bucketed_rows`; the padding rows' outputs are dropped."""
    rows = x.shape[row_dim]
    padded = rows if x.is_cuda else bucketed_rows(rows)
    if padded == rows:
        return run(x)
    widths = [0, 0] * (x.dim() - 1 - row_dim) + [0, padded - rows]  # F.pad counts from the last dimension
    return run(nn.functional.pad(x, widths)).narrow(row_dim, 0, rows)
