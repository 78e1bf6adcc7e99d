"""LSTM layers at CPU inference run time-major, as oneDNN reads and writes them.

The batch-first route (:mod:`textorch.models.padded_rnn`) transposes each direction's input and
output, reverses the backward direction on both sides, then gathers or masks. Two callers need
none of that: a one-sequence call (:mod:`textorch.models.one_sequence`), whose one row has no
padding and whose dense layer and CRF take time-major rows as they come, and the character
BiLSTM, which reads only each row's last real step. Both run here, only where the LSTM's
weights are kept laid out (:func:`textorch.models.onednn_lstm.applies`); the values at every
real position are the batch-first route's, bit for bit (tested).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from textorch.models import costs, onednn_lstm
from textorch.models.row_buckets import in_row_buckets
from textorch.models.rows import select_rows


def time_major_layers(rnn: nn.LSTM, h: torch.Tensor) -> torch.Tensor:
    """``(T, B, directions * H)``: every layer of ``rnn`` over time-major ``h`` ``(T, B, D)`` whose
    rows all have ``T`` steps (a one-sequence call). Call only where :func:`onednn_lstm.applies`."""
    h = h.to(onednn_lstm.call_dtype(), memory_format=torch.contiguous_format)
    for layer in range(rnn.num_layers):
        forward = _direction(rnn, h, layer, "")
        if not rnn.bidirectional:
            h = forward
            continue
        backward = _direction(rnn, torch.flip(h, dims=(0,)), layer, "_reverse")
        h = torch.cat([forward, torch.flip(backward, dims=(0,))], dim=-1)
    return h


def time_major_final_states(rnn: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``padded_rnn.final_states`` of a one-layer LSTM over batch-first ``x`` ``(N, T, D)`` with
    ``lengths`` (>= 1, on the CPU), read at each row's last real step of each direction: the
    forward one has read the row there, and so has the backward one, which reads the row
    reversed within its length. Small tables (a one-sequence call's new tokens) run both
    directions as one call (:func:`onednn_lstm.both_directions_time_major`), whose rows hold
    both final states side by side. Call only where :func:`onednn_lstm.applies`."""
    rows, steps = x.shape[:2]
    counts = lengths.numpy()
    h = x.transpose(0, 1).to(onednn_lstm.call_dtype(), memory_format=torch.contiguous_format)
    last = torch.from_numpy((counts - 1) * rows + np.arange(rows))
    if not rnn.bidirectional:
        return _last_steps(_direction(rnn, h, 0, ""), last)
    backward_input = _read_back(h, counts)
    if _both_directions_pay(rnn, rows, steps, x.shape[2]):
        side_by_side = torch.cat([h, backward_input], dim=-1)
        both = in_row_buckets(lambda part: onednn_lstm.both_directions_time_major(rnn, part, 0), side_by_side, row_dim=1)
        return _last_steps(both, last)
    return torch.cat([_last_steps(_direction(rnn, h, 0, ""), last),
                      _last_steps(_direction(rnn, backward_input, 0, "_reverse"), last)], dim=-1)


def _both_directions_pay(rnn: nn.LSTM, rows: int, steps: int, inputs: int) -> bool:
    """Float32 only: the doubled LSTM is checked bit for bit against two calls there."""
    work = rows * steps * rnn.hidden_size * (inputs + rnn.hidden_size)
    return work <= costs.BOTH_DIRECTIONS_MAX_WORK and onednn_lstm.call_dtype() is torch.float32


def _direction(rnn: nn.LSTM, h: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    """One direction over time-major ``h``, its rows padded to a bucket as in ``padded_rnn``."""
    return in_row_buckets(lambda part: onednn_lstm.time_major_direction(rnn, part, layer, suffix), h, row_dim=1)


def _read_back(h: torch.Tensor, counts: np.ndarray) -> torch.Tensor:
    """Each row of time-major ``h`` ``(T, N, D)`` read backwards within its length (``counts``);
    padded steps stay in place. The index is built in NumPy: on a one-sentence table each small
    PyTorch operator costs more than its arithmetic."""
    steps, rows = h.shape[:2]
    if int(counts.min()) == steps:
        return torch.flip(h, dims=(0,))
    t = np.arange(steps)[:, None]
    read = np.where(t < counts, counts - 1 - t, t) * rows + np.arange(rows)
    return select_rows(h.reshape(steps * rows, -1), torch.from_numpy(read.reshape(-1))).reshape(steps, rows, -1)


def _last_steps(out: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    steps, rows = out.shape[:2]
    return select_rows(out.reshape(steps * rows, -1), last)
