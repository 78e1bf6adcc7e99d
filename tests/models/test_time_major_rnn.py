"""LSTMs run time-major at CPU inference (``time_major_rnn``): the batch-first route's values
bit for bit, both directions in one call equal to each alone, and joint weights made again
after any change."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from textorch.models import costs, onednn_lstm, padded_rnn, time_major_rnn
from textorch.models.onednn_lstm import laid_out_lstm_available

pytestmark = pytest.mark.skipif(not laid_out_lstm_available(), reason="this torch build cannot lay out LSTM weights")


def _lstm(input_size: int = 6, hidden: int = 5, layers: int = 1, bidirectional: bool = True) -> nn.LSTM:
    torch.manual_seed(3)
    return nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional).eval()


@pytest.mark.parametrize("one_call", [True, False])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("lengths", [[4, 4, 4], [9, 1, 4, 7, 2, 9, 3, 3, 5, 8, 6, 1, 2, 2, 4, 7, 9, 1, 5]])
def test_final_states_at_inference_run_time_major_and_equal_the_general_route(
    monkeypatch: pytest.MonkeyPatch, one_call: bool, bidirectional: bool, lengths: list[int]
) -> None:
    """Character-encoder final states at CPU inference (no padding: a flip; unsorted padded rows,
    19 run as a bucket of 20), both directions in one call (small tables) or two: the packed
    LSTM's ``h_n``, and the batch-first route's values exactly."""
    rnn = _lstm(bidirectional=bidirectional)
    lengths_t = torch.tensor(lengths)
    x = torch.randn(len(lengths), max(lengths), 6, generator=torch.Generator().manual_seed(len(lengths)))
    taken: list[int] = []
    real = padded_rnn.time_major_final_states
    monkeypatch.setattr(padded_rnn, "time_major_final_states", lambda *a: taken.append(1) or real(*a))
    monkeypatch.setattr(costs, "BOTH_DIRECTIONS_MAX_WORK", 10**9 if one_call else 0)
    joint: list[int] = []
    both = onednn_lstm.both_directions_time_major
    monkeypatch.setattr(onednn_lstm, "both_directions_time_major", lambda *a: joint.append(1) or both(*a))
    with torch.inference_mode():
        got = padded_rnn.final_states(rnn, x, lengths_t)
        general = padded_rnn._batch_first_final_states(rnn, x, lengths_t)
        _, (h_n, _) = rnn(nn.utils.rnn.pack_padded_sequence(x, lengths_t, batch_first=True, enforce_sorted=False))
    assert taken  # every length group took the time-major route
    assert bool(joint) == (one_call and bidirectional)
    assert torch.allclose(got, torch.cat(list(h_n), dim=-1), atol=1e-6, rtol=0)
    assert torch.equal(got, general)


def test_final_states_keep_the_general_route_when_gradients_are_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    rnn = _lstm().train()
    taken: list[int] = []
    monkeypatch.setattr(padded_rnn, "time_major_final_states", lambda *a: taken.append(1))
    x = torch.randn(3, 5, 6)
    out = padded_rnn.final_states(rnn, x, torch.tensor([5, 2, 4]))
    assert taken == [] and out.shape == (3, 10) and out.requires_grad


@pytest.mark.parametrize("layers", [1, 2])
def test_time_major_layers_equal_the_batch_first_outputs_of_one_row(layers: int) -> None:
    """A one-sequence call's BiLSTM (no padding: backward by a flip), one or two layers."""
    rnn = _lstm(layers=layers)
    x = torch.randn(1, 9, 6, generator=torch.Generator().manual_seed(layers))
    with torch.inference_mode():
        got = time_major_rnn.time_major_layers(rnn, x.transpose(0, 1))
        expected = padded_rnn.rnn_outputs(rnn, x, torch.tensor([9]))
    assert got.shape == (9, 1, 10)
    assert torch.equal(got.transpose(0, 1), expected)


@pytest.mark.parametrize("steps, rows", [(1, 1), (7, 3), (5, 20)])
def test_both_directions_in_one_call_equal_each_direction_alone(steps: int, rows: int) -> None:
    """Block-diagonal weights: the doubled LSTM's halves are the two directions' own outputs
    (input and hidden sizes differ, so a misplaced block would show)."""
    rnn = _lstm(input_size=7, hidden=5)
    generator = torch.Generator().manual_seed(steps * rows)
    forward_in, backward_in = (torch.randn(steps, rows, 7, generator=generator) for _ in range(2))
    with torch.inference_mode():
        both = onednn_lstm.both_directions_time_major(rnn, torch.cat([forward_in, backward_in], dim=-1), 0)
        forward = onednn_lstm.time_major_direction(rnn, forward_in, 0, "")
        backward = onednn_lstm.time_major_direction(rnn, backward_in, 0, "_reverse")
    assert both.shape == (steps, rows, 10)
    assert torch.allclose(both[..., :5], forward, atol=1e-6, rtol=0)
    assert torch.allclose(both[..., 5:], backward, atol=1e-6, rtol=0)


def test_the_joint_weights_are_made_once_then_again_when_either_direction_changes() -> None:
    rnn = _lstm(input_size=4, hidden=3)
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(4))

    def expected() -> torch.Tensor:
        return torch.cat([onednn_lstm.time_major_direction(rnn, x[..., :4], 0, ""),
                          onednn_lstm.time_major_direction(rnn, x[..., 4:], 0, "_reverse")], dim=-1)

    with torch.inference_mode():
        first = onednn_lstm.both_directions_time_major(rnn, x, 0)
        entry = onednn_lstm._laid_out[rnn][(0, "both", torch.float32)]
        assert torch.equal(onednn_lstm.both_directions_time_major(rnn, x, 0), first)
        assert onednn_lstm._laid_out[rnn][(0, "both", torch.float32)] is entry
    with torch.no_grad():
        rnn.weight_hh_l0_reverse.data.mul_(-1.0)  # the backward direction only, through .data
    with torch.inference_mode():
        changed = onednn_lstm.both_directions_time_major(rnn, x, 0)
        assert onednn_lstm._laid_out[rnn][(0, "both", torch.float32)] is not entry
        assert torch.allclose(changed, expected(), atol=1e-6, rtol=0)
        assert not torch.allclose(changed[..., 3:], first[..., 3:], atol=1e-4)
