"""LSTM layers at CPU inference run time-major, as oneDNN reads and writes them.

The batch-first path copies each direction's input and output across, reverses the backward
direction on both sides, and masks; the tagger's dense layer and CRF are as happy with
time-major rows, and character encoders need only each row's last real step. Only where the
LSTM's weights are kept laid out (:func:`textorch.models.onednn_lstm.applies`); the values at
every real position are the batch-first path's (:mod:`textorch.models.padded_rnn`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from textorch.models import onednn_lstm
from textorch.models.packing_rule import packs
from textorch.models.row_buckets import in_row_buckets
from textorch.models.rows import select_rows


def time_major_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor | None:
    """Tagging's outputs ``(T, B, directions * H)`` of an LSTM over batch-first, right-padded ``x``,
    time-major; positions past a row's length hold finite values nobody may read. None where
    this does not apply (see below): then :func:`textorch.models.padded_rnn.rnn_outputs`.

    Why: oneDNN's recurrent layer reads and writes time-major tensors, so the batch-first path
    copies each direction's input and output across, reverses the backward direction on both
    sides, and masks; the tagger's dense layer and CRF are as happy with time-major rows. Only
    where the
    LSTM's weights are kept laid out (:func:`textorch.models.onednn_lstm.applies`: CPU inference in float32, or
    in bfloat16 under ``--precision bf16``, whose outputs are then bfloat16), and not for
    batches that :func:`textorch.models.padded_rnn.rnn_outputs` would pack (mostly padding)."""
    if lengths.device.type != "cpu" or not onednn_lstm.applies(rnn, x):  # applies: LSTMs only
        return None
    steps = x.shape[1]
    padding = int(lengths.min()) < steps
    if padding and packs(rnn, x, lengths):
        return None
    flat_reverse = _time_major_reverse_index(lengths, steps) if rnn.bidirectional and padding else None
    return time_major_layers(rnn, _time_major_copy(x), flat_reverse)


def time_major_layers(rnn: nn.RNNBase, h: torch.Tensor, flat_reverse: torch.Tensor | None) -> torch.Tensor:
    """``(T, B, directions * H)``: every layer of ``rnn`` over time-major ``h`` ``(T, B, D)`` in the
    LSTM's format (:func:`_time_major_copy`), each row read backwards within its length by
    ``flat_reverse`` (:func:`_time_major_reverse_index`; None where no row is padded). Call only
    where :func:`textorch.models.onednn_lstm.applies` (:func:`time_major_outputs`, and a one-sequence call's
    :class:`textorch.models.one_sequence.OneSequenceTagger`, which has no padding to look for)."""
    for layer in range(rnn.num_layers):
        forward, backward = _time_major_directions(rnn, h, layer, flat_reverse)
        h = forward if backward is None else torch.cat([forward, _reversed_time_major(backward, flat_reverse)], dim=-1)
    return h


def _time_major_copy(x: torch.Tensor) -> torch.Tensor:
    """Batch-first ``x`` as a contiguous time-major tensor in the format the LSTM runs in
    (:func:`onednn_lstm.call_dtype`; callers have checked :func:`textorch.models.onednn_lstm.applies`): one
    copy, so that neither direction converts it again."""
    return x.transpose(0, 1).to(onednn_lstm.call_dtype(), memory_format=torch.contiguous_format)


def _time_major_directions(
    rnn: nn.RNNBase, h: torch.Tensor, layer: int, flat_reverse: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Outputs of layer ``layer``'s directions over time-major ``h``: the forward one, and the
    backward one (None for a unidirectional RNN) in the order it read each row, reversed within
    its length (``flat_reverse``: :func:`_time_major_reverse_index`, None where no row is padded)."""
    forward = _time_major_direction(rnn, h, layer, "")
    if not rnn.bidirectional:
        return forward, None
    return forward, _time_major_direction(rnn, _reversed_time_major(h, flat_reverse), layer, "_reverse")


def _time_major_reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """Row ``t * rows + b`` of a flattened time-major ``(T, B)`` grid reads row ``b``'s step
    ``reverse_index[b, t]``: :func:`textorch.models.padded_rnn.reverse_index` for time-major rows,
    whose ``lengths`` are on the CPU. Built in NumPy: on a one-sentence character table each
    small PyTorch operator costs more than its arithmetic. ``padded_rnn.reverse_index`` itself
    stays in PyTorch: the ONNX export traces it into the graph, and training builds it on the
    device."""
    n = lengths.numpy()
    return torch.from_numpy((time_major_read_back(n, steps) * len(n) + np.arange(len(n))).reshape(-1))


def time_major_read_back(lengths: np.ndarray, steps: int) -> np.ndarray:
    """``(T, B)``: the step row ``b`` reads at time ``t`` when read backwards within its length
    (``lengths[b] - 1 - t``; padded steps stay where they are)."""
    t = np.arange(steps)[:, None]
    return np.where(t < lengths, lengths - 1 - t, t)


def time_major_last_steps(lengths: np.ndarray) -> torch.Tensor:
    """Row of each sequence's last step in a flattened time-major ``(T * B, ...)`` tensor."""
    return torch.from_numpy((lengths - 1) * len(lengths) + np.arange(len(lengths)))


def _reversed_time_major(h: torch.Tensor, flat_reverse: torch.Tensor | None) -> torch.Tensor:
    """Each row of time-major ``h`` read backwards within its length (a flip when none is padded)."""
    if flat_reverse is None:
        return torch.flip(h, dims=(0,))
    steps, rows = h.shape[:2]
    return select_rows(h.reshape(steps * rows, -1), flat_reverse).reshape(steps, rows, -1)


def _time_major_direction(rnn: nn.LSTM, h: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    """One direction over time-major ``h``, its rows padded to a bucket as in ``padded_rnn._one_direction``."""
    return in_row_buckets(lambda rows: onednn_lstm.time_major_direction(rnn, rows, layer, suffix), h, row_dim=1)


BOTH_DIRECTIONS_MAX_WORK = 450_000
"""Largest ``rows * steps * hidden * (inputs + hidden)`` (a direction's multiply-adds over 4) for
which :func:`time_major_final_states` runs both directions as one oneDNN call
(:func:`onednn_lstm.both_directions_time_major`): one call's fixed cost and a gather saved, the
other direction's arithmetic done again: the bound where the character BiLSTM's two calls
stopped being slower than one (docs/performance.md). The word BiLSTM's outputs keep two calls:
one call lost from a few tokens on, and its outputs must be split again."""


def both_directions_pay(rnn: nn.RNNBase, rows: int, steps: int, inputs: int) -> bool:
    """Whether a bidirectional layer over ``rows`` x ``steps`` of ``inputs`` features runs its two
    directions as one call (``BOTH_DIRECTIONS_MAX_WORK``)."""
    return rnn.bidirectional and rows * steps * rnn.hidden_size * (inputs + rnn.hidden_size) <= BOTH_DIRECTIONS_MAX_WORK


def both_directions_time_major(rnn: nn.LSTM, side_by_side: torch.Tensor) -> torch.Tensor:
    """``(T, B, 2H)``: :func:`onednn_lstm.both_directions_time_major` of the first layer over
    ``side_by_side`` ``(T, B, 2D)`` (each row, then each row read backwards within its length),
    its rows padded to a bucket as every CPU recurrent call's are."""
    return in_row_buckets(lambda part: onednn_lstm.both_directions_time_major(rnn, part, 0), side_by_side, row_dim=1)


def _both_directions(rnn: nn.RNNBase, h: torch.Tensor, flat_reverse: torch.Tensor | None) -> torch.Tensor | None:
    """``(T, B, 2H)``: both directions of a one-layer bidirectional LSTM over time-major ``h`` as
    one call, the backward one in the order it read (as :func:`_time_major_directions`), where
    :func:`both_directions_pay`; else None."""
    steps, rows, inputs = h.shape
    if not both_directions_pay(rnn, rows, steps, inputs):
        return None
    return both_directions_time_major(rnn, torch.cat([h, _reversed_time_major(h, flat_reverse)], dim=-1))


def time_major_final_states(rnn: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``padded_rnn.final_states`` of a one-layer LSTM at CPU inference, run time-major as oneDNN
    reads and writes it (see :func:`time_major_outputs`).

    Only each row's last real step is read from either direction: the forward one there has
    read the row, and so has the backward one, which reads the row reversed within its length.
    The batch-first path reversed the backward outputs back, concatenated both directions and
    gathered from the result, and transposed every direction's input and output, a large share
    of a small character table's time. Small tables (one-sequence calls) run both
    directions as one call (:func:`_both_directions`), whose output rows hold both final states."""
    rows, steps = x.shape[:2]
    flat_reverse = _time_major_reverse_index(lengths, steps) if rnn.bidirectional and int(lengths.min()) < steps else None
    h = _time_major_copy(x)
    last = time_major_last_steps(lengths.numpy())
    both = _both_directions(rnn, h, flat_reverse)
    if both is not None:  # the two final states side by side already
        return select_rows(both.reshape(steps * rows, -1), last)
    directions = _time_major_directions(rnn, h, 0, flat_reverse)
    return torch.cat([select_rows(out.reshape(steps * rows, -1), last) for out in directions if out is not None], dim=-1)
