"""Row picking helpers: the same values and gradients as advanced indexing."""

from __future__ import annotations

import torch

from textorch.models.padded_rnn import _flat_time_index, reverse_in_time, reverse_index
from textorch.models.rows import inverse_permutation, permute_rows, select_rows


def _grad_of(pick, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    leaf = x.clone().requires_grad_(True)
    (pick(leaf) * weights).sum().backward()
    return leaf.grad


def test_select_rows_equals_indexing_with_repeats_and_any_index_shape() -> None:
    torch.manual_seed(0)
    x = torch.randn(7, 3, 5)
    index = torch.tensor([[6, 0, 0], [2, 6, 1]])  # rows repeat: their gradients must add up
    assert torch.equal(select_rows(x, index), x[index])
    weights = torch.randn(2, 3, 3, 5)
    expected = _grad_of(lambda t: t[index], x, weights)
    assert torch.allclose(_grad_of(lambda t: select_rows(t, index), x, weights), expected)
    assert expected[0].abs().sum() > 0 and expected[3].abs().sum() == 0  # a real check: used and unused rows


def test_permute_rows_gradient_is_the_inverse_permutation() -> None:
    torch.manual_seed(1)
    x = torch.randn(9, 4)
    order = torch.randperm(9)
    inverse = inverse_permutation(order)
    assert torch.equal(order[inverse], torch.arange(9)) and torch.equal(inverse[order], torch.arange(9))
    assert torch.equal(permute_rows(x, order, inverse), x[order])
    weights = torch.randn(9, 4)
    assert torch.allclose(_grad_of(lambda t: permute_rows(t, order, inverse), x, weights),
                          _grad_of(lambda t: t[order], x, weights))
    with torch.no_grad():  # no graph: a plain row copy
        assert torch.equal(permute_rows(x.requires_grad_(True), order, inverse), x[order])


def test_reverse_in_time_reads_each_row_backwards_within_its_length() -> None:
    torch.manual_seed(2)
    x = torch.randn(3, 5, 2)
    lengths = torch.tensor([5, 2, 3])
    flat = _flat_time_index(reverse_index(lengths, 5), 5)
    reversed_x = reverse_in_time(x, flat)
    for row, n in enumerate(lengths.tolist()):
        assert torch.equal(reversed_x[row, :n], x[row, :n].flip(0))
        assert torch.equal(reversed_x[row, n:], x[row, n:])  # padding stays where it is
    weights = torch.randn(3, 5, 2)
    index = reverse_index(lengths, 5)
    by_indexing = lambda t: t[torch.arange(3)[:, None], index]  # noqa: E731
    assert torch.allclose(_grad_of(lambda t: reverse_in_time(t, flat), x, weights), _grad_of(by_indexing, x, weights))
