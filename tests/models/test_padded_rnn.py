"""Recurrent layers over padded batches without packing (training and tagging), in groups of
similar lengths and in row buckets, give the packed computation's outputs and gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from textorch.models import costs as cost_constants
from textorch.models import length_groups, padded_rnn
from textorch.models.padded_rnn import (
    final_states,
    masked_padded_rnn,
    rnn_final_states,
    rnn_outputs,
)


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("layers,bidirectional,rows", [(1, True, 4), (2, True, 4), (1, False, 4), (1, True, 300)])
def test_padded_rnn_equals_packed_with_gradients(cell: type, layers: int, bidirectional: bool, rows: int) -> None:
    """300 rows, a long tail of lengths: final states run in groups of similar length
    (padded_rnn.final_states)."""
    torch.manual_seed(0)
    rnn = cell(7, 5, num_layers=layers, batch_first=True, bidirectional=bidirectional)
    x = torch.randn(rows, 9, 7, requires_grad=True)
    lengths = torch.tensor([9, 4, 1, 6]) if rows == 4 else torch.cat([torch.randint(1, 4, (rows - 20,)), torch.randint(5, 10, (20,))])
    if rows > 4:
        assert padded_rnn.length_groups(lengths, padded_rnn.FINAL_STATE_GROUP_COSTS) is not None

    def packed_run() -> tuple[torch.Tensor, torch.Tensor]:
        out, h_n = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        h_n = h_n[0] if isinstance(h_n, tuple) else h_n
        last = torch.cat(list(h_n[-2:] if bidirectional else h_n[-1:]), dim=-1)
        return pad_packed_sequence(out, batch_first=True, total_length=9)[0], last

    expected, expected_final = packed_run()
    (expected.sum() + expected_final.sum()).backward()
    expected_grads = [p.grad.clone() for p in rnn.parameters()] + [x.grad.clone()]
    rnn.zero_grad()
    x.grad = None
    out = masked_padded_rnn(rnn, x, lengths)
    final = final_states(rnn, x, lengths)
    (out.sum() + final.sum()).backward()
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(final, expected_final, atol=1e-6)
    for got, want in zip([p.grad for p in rnn.parameters()] + [x.grad], expected_grads):
        assert torch.allclose(got, want, atol=1e-4)
    with torch.inference_mode():  # tagging takes the same unpacked route
        assert torch.allclose(rnn_final_states(rnn, x, lengths), expected_final, atol=1e-6)
        assert torch.allclose(rnn_outputs(rnn, x, lengths), expected, atol=1e-6)


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_training_rnn_in_length_groups_equals_packed_outputs_and_gradients(cell: type) -> None:
    """A random batch (one 60-step row among short ones) runs its word RNN in length groups
    when training; outputs and gradients equal the packed computation's."""
    torch.manual_seed(4)
    rnn = cell(6, 4, batch_first=True, bidirectional=True)
    lengths = torch.tensor([3, 60, 2, 5, 4, 3, 1, 6, 2, 5, 3, 4])
    assert padded_rnn.length_groups(lengths, cost_constants.TRAINING_GROUP_COSTS) is not None
    x = torch.randn(len(lengths), 60, 6, requires_grad=True)
    weights = torch.randn(len(lengths), 60, 8)  # a loss that weighs every output differently

    def grads_of(run) -> tuple[torch.Tensor, list[torch.Tensor]]:
        rnn.zero_grad()
        x.grad = None
        out = run()
        (out * weights).sum().backward()
        return out.detach(), [p.grad.clone() for p in rnn.parameters()] + [x.grad.clone()]

    def packed() -> torch.Tensor:
        out, _ = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        return pad_packed_sequence(out, batch_first=True, total_length=60)[0]

    expected, expected_grads = grads_of(packed)
    got, got_grads = grads_of(lambda: rnn_outputs(rnn, x, lengths))
    assert torch.allclose(got, expected, atol=1e-6)
    for g, e in zip(got_grads, expected_grads):
        assert torch.allclose(g, e, atol=1e-5)


def test_bucketed_rows_round_up_to_four_sizes_per_doubling() -> None:
    assert [padded_rnn.bucketed_rows(n) for n in (1, 7, 16)] == [1, 7, 16]  # small counts exact
    assert [padded_rnn.bucketed_rows(n) for n in (17, 20, 21, 33, 129, 300)] == [20, 20, 24, 40, 160, 320]
    for low in (32, 64, 256, 1024):
        sizes = {padded_rnn.bucketed_rows(n) for n in range(low + 1, 2 * low + 1)}
        assert len(sizes) == 4 and max(sizes) == 2 * low
    assert all(n <= padded_rnn.bucketed_rows(n) < 1.25 * n for n in range(17, 5000))


def test_cpu_recurrent_calls_see_bucketed_row_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """37 rows run as 40 (one oneDNN kernel for 33-40 rows); outputs and gradients stay those
    of the 37 rows alone."""
    torch.manual_seed(2)
    rnn = nn.LSTM(6, 4, batch_first=True, bidirectional=True)
    lengths = torch.randint(1, 8, (37,))
    x = torch.randn(37, 7, 6, requires_grad=True)
    seen: list[int] = []
    exact = padded_rnn._one_direction_exact
    monkeypatch.setattr(padded_rnn, "_one_direction_exact", lambda *a: seen.append(a[1].shape[0]) or exact(*a))
    out = masked_padded_rnn(rnn, x, lengths)
    out.sum().backward()
    assert seen == [40, 40]
    got_grads = [p.grad.clone() for p in rnn.parameters()] + [x.grad.clone()]
    rnn.zero_grad()
    x.grad = None
    packed, _ = rnn(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    expected = pad_packed_sequence(packed, batch_first=True, total_length=7)[0]
    expected.sum().backward()
    assert out.shape == (37, 7, 8) and torch.allclose(out, expected, atol=1e-6)
    for got, want in zip(got_grads, [p.grad for p in rnn.parameters()] + [x.grad]):
        assert torch.allclose(got, want, atol=1e-5)


def _brute_force_cost(sizes: list[int], costs: padded_rnn.GroupCosts) -> float:
    """Cheapest cost over every way to cut the sorted rows into 1..max_groups groups."""
    s = sorted(sizes)
    best = float("inf")
    for k in range(costs.max_groups):
        for cuts in itertools.combinations(range(1, len(s)), k):
            bounds = (0, *cuts, len(s))
            total = sum(s[b - 1] * (b - a + costs.step_cost_in_rows) + costs.group_cost for a, b in zip(bounds[:-1], bounds[1:]))
            best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_length_groups_find_the_cheapest_cuts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 5, 8, 13, 40, 200], size=int(rng.integers(2, 13))).tolist()
    costs = padded_rnn.GroupCosts(step_cost_in_rows=3.3, group_cost=float(rng.choice([5.0, 60.0, 600.0])), max_groups=3)
    groups = padded_rnn.length_groups(torch.tensor(sizes), costs)
    parts = [[sizes[i] for i in g.tolist()] for g in groups] if groups else [sizes]
    assert sorted(i for g in (groups or [torch.arange(len(sizes))]) for i in g.tolist()) == list(range(len(sizes)))
    got = sum(max(p) * (len(p) + costs.step_cost_in_rows) + costs.group_cost for p in parts)
    assert got == pytest.approx(_brute_force_cost(sizes, costs))


def test_quick_bound_never_keeps_one_block_when_a_split_is_cheaper() -> None:
    rng = np.random.default_rng(0)
    settled = 0
    for _ in range(200):
        sizes = rng.choice([1, 2, 3, 4, 5, 8, 13, 40], size=int(rng.integers(2, 11))).tolist()
        costs = padded_rnn.GroupCosts(step_cost_in_rows=3.3, group_cost=float(rng.choice([5.0, 60.0, 160.0, 600.0])),
                                      max_groups=3)
        one_block = max(sizes) * (len(sizes) + costs.step_cost_in_rows) + costs.group_cost
        if length_groups._one_block_is_cheapest(np.array(sizes), costs):
            settled += 1
            assert _brute_force_cost(sizes, costs) == pytest.approx(one_block), (sizes, costs)
    assert settled > 50  # the bound settles many cases, not only trivial ones


def test_quick_bound_settles_short_tagging_batches() -> None:
    """GROBID date's test batches (32 rows of 1-4 and of 4-8 tokens) need no search."""
    costs = cost_constants.INFERENCE_GROUP_COSTS
    for sizes in ([1] * 4 + [2] * 16 + [3] * 7 + [4] * 5, [4] * 9 + [5] * 16 + [7] * 5 + [8] * 2):
        assert length_groups._one_block_is_cheapest(np.array(sizes), costs)
    assert not length_groups._one_block_is_cheapest(np.array([5, 7, 9, 873] + [10] * 28), costs)


def test_length_groups_split_heavy_tails_only() -> None:
    costs = cost_constants.INFERENCE_GROUP_COSTS
    groups = padded_rnn.length_groups(torch.tensor([5, 7, 9, 873] + [10] * 28), costs)
    assert groups is not None and [g.tolist() for g in groups][-1] == [3]  # the long one alone
    assert sorted(torch.cat(groups).tolist()) == list(range(32))
    assert padded_rnn.length_groups(torch.tensor([14, 15, 16, 17, 18, 19, 20, 21] * 4), costs) is None
    assert padded_rnn.length_groups(torch.tensor([7]), costs) is None


@pytest.mark.parametrize("cell, lengths", [
    (nn.LSTM, [9, 9, 9]), (nn.LSTM, [9, 8, 7, 9]), (nn.LSTM, [9, 1, 2, 1]), (nn.LSTM, [9] + [1, 2] * 20),
    (nn.GRU, [9, 8, 7, 9]), (nn.GRU, [9, 1, 2, 1]),
])
def test_tagging_outputs_equal_packed(cell: type, lengths: list[int]) -> None:
    """No padding (fused call), little padding, mostly padding: the unpacked directions give
    the packed outputs at every position."""
    torch.manual_seed(1)
    rnn = cell(7, 5, batch_first=True, bidirectional=True)
    x = torch.randn(len(lengths), 9, 7)
    n = torch.tensor(lengths)
    expected, _ = rnn(pack_padded_sequence(x, n, batch_first=True, enforce_sorted=False))
    expected = pad_packed_sequence(expected, batch_first=True, total_length=9)[0]
    with torch.inference_mode():
        got = rnn_outputs(rnn, x, n)
    assert torch.allclose(got, expected, atol=1e-6)


