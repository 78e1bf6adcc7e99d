"""Picking rows of a tensor by index, the way that is cheap on the CPU.

Advanced indexing (``x[index]``) goes through ``aten::index``, which on the CPU copies element
by element, and its gradient is an ``index_put_`` with accumulation, slower still;
``index_select`` copies whole rows, many times faster for rows of a few hundred floats
(docs/performance.md). The recurrent
layers pick rows several times per batch (reversing each sequence within its length, grouping
rows by length, gathering each token's character vector), so these helpers stand in for
``x[index]`` on those paths.
"""

from __future__ import annotations

import torch


def select_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[index]`` for an integer ``index`` of any shape (rows may repeat): ``index.shape +
    x.shape[1:]``. The gradient adds up over repeated rows, as indexing's does."""
    return x.index_select(0, index.reshape(-1)).reshape(*index.shape, *x.shape[1:])


def inverse_permutation(order: torch.Tensor) -> torch.Tensor:
    """The index that puts rows taken in ``order`` back where they came from."""
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return inverse


def permute_rows(x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """``x[index]`` where ``index`` is a permutation of the rows and ``inverse`` its inverse.

    The gradient of a permutation is the inverse permutation of the incoming gradient: one more
    row copy instead of the scatter-add that general indexing needs (no row can repeat)."""
    if not (torch.is_grad_enabled() and x.requires_grad):
        return x.index_select(0, index)
    return _Permutation.apply(x, index, inverse)


class _Permutation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, index: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(inverse)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (inverse,) = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None
