"""Recurrent layers over right-padded batches, exact on every real step, without packing.

Packing (``pack_padded_sequence``) keeps padding out of a bidirectional RNN, but on the CPU it
takes PyTorch's step-by-step kernel instead of the fused oneDNN one: forward plus backward of a
CoNLL-2003 batch ran 1.45-1.6x slower packed (CoNLL training went from 13.0k to 16.0k tokens/s),
and tagging too ran 5-50 % slower packed (word BiLSTM, sorted batches of 8-256). Tagging still
packs on CUDA, where cuDNN runs packed batches natively, and on the CPU for batches that are
mostly padding (``PACKING_FILL``).

Unpacked, each direction runs on padded input: the forward direction never reads
what follows a step, and the backward direction reads every sequence reversed *within its own
length* (a gather), so neither ever sees padding. The parameters are the module's own, so
training updates the same weights and saved models are unchanged.

Character encoders see rows of very different lengths (CoNLL tokens: 1 to 20+ characters,
mostly under 8), so :func:`final_states` sorts rows by length and runs a few groups, each
padded to its own longest row: 1.4x faster than one padded block in training and 1.7x faster
than packing when tagging a whole test set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T) positions that read each row backwards within its length; padding stays in place."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(0)
    n = lengths.to(t.device).unsqueeze(1)
    return torch.where(t < n, n - 1 - t, t)


def gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[b, index[b, t]]`` for every row and step (``index`` is ``(B, T)``, ``x`` ``(B, T, D)``).

    Rows of the flattened ``(B*T, D)`` tensor picked by one index: forward plus backward took
    180 us against 330 us for ``gather`` with an index expanded over D (a CoNLL batch)."""
    batch, steps = index.shape
    offsets = torch.arange(batch, device=index.device).unsqueeze(1) * x.shape[1]
    return x.reshape(batch * x.shape[1], -1)[(index + offsets).reshape(-1)].reshape(batch, steps, -1)


ONEDNN_ROW_BUCKETS_FROM = 16
"""Above this many rows a CPU recurrent call is padded to a few row counts per doubling.

oneDNN builds (and JIT-compiles) a kernel for every new input shape: 1-2 ms in fp32, about
3 ms in bf16, against 0.25 ms for a whole cached call of the character BiLSTM. Character rows
are the distinct tokens of a batch, a new count nearly every training step (CoNLL-2003: 594
shapes in 834 calls an epoch), so one epoch spent 0.42 s (fp32) or 2.7 s (bf16) building
kernels; with rows rounded up (at most 4 sizes per doubling, 12 % padding on average) 0.11 s
and 0.65 s. Padded rows are zeros whose outputs are dropped: results are unchanged."""


def bucketed_rows(rows: int) -> int:
    """``rows`` rounded up to one of four sizes per doubling above ``ONEDNN_ROW_BUCKETS_FROM``."""
    if rows <= ONEDNN_ROW_BUCKETS_FROM:
        return rows
    step = 1 << (rows.bit_length() - 3)
    return -(-rows // step) * step


@functools.cache
def cpu_lstm_takes_bf16() -> bool:
    """Whether oneDNN's CPU LSTM runs under bfloat16 autocast on this machine.

    Without AVX512 (an AVX2-only CPU, say) PyTorch routes an autocast LSTM to a oneDNN bfloat16
    primitive that does not exist there and raises ("could not create a primitive descriptor");
    GRUs and packed LSTMs never go that way. Tried once on a tiny LSTM rather than read from CPU
    flags, so that whatever oneDNN supports decides."""
    lstm = nn.LSTM(4, 4, batch_first=True)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 2, 4))
    except RuntimeError:
        return False
    return True


def _needs_fp32_lstm(rnn: nn.RNNBase, x: torch.Tensor) -> bool:
    return (isinstance(rnn, nn.LSTM) and x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not cpu_lstm_takes_bf16())


def _fp32_lstm_where_bf16_fails(run: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Run ``run(rnn, x, lengths)`` with autocast off and ``x`` in float32 when this CPU's LSTM
    cannot take bfloat16 (:func:`cpu_lstm_takes_bf16`): ``--precision bf16`` then still works,
    its recurrent layers in fp32 and its matrix products in (emulated) bfloat16."""

    @functools.wraps(run)
    def guarded(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if not _needs_fp32_lstm(rnn, x):
            return run(rnn, x, lengths)
        with torch.autocast("cpu", enabled=False):
            return run(rnn, x.float(), lengths)

    return guarded


def _one_direction(rnn: nn.RNNBase, x: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    """One direction of one layer; on the CPU with rows padded to a bucket (``bucketed_rows``)."""
    rows = x.shape[0]
    padded = rows if x.is_cuda else bucketed_rows(rows)
    if padded == rows:
        return _one_direction_exact(rnn, x, layer, suffix)
    x = nn.functional.pad(x, (0, 0, 0, 0, 0, padded - rows))
    return _one_direction_exact(rnn, x, layer, suffix)[:rows]


def _one_direction_exact(rnn: nn.RNNBase, x: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
    if rnn.bias:
        names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
    params = [getattr(rnn, name) for name in names]
    h0 = x.new_zeros(1, x.shape[0], rnn.hidden_size)
    if isinstance(rnn, nn.LSTM):
        if rnn.proj_size:
            raise ValueError("LSTMs with proj_size are not supported")
        out, _, _ = torch.lstm(x, (h0, h0), params, rnn.bias, 1, 0.0, rnn.training, False, True)
    elif isinstance(rnn, nn.GRU):
        out, _ = torch.gru(x, h0, params, rnn.bias, 1, 0.0, rnn.training, False, True)
    else:
        raise ValueError(f"unsupported recurrent layer {type(rnn).__name__}")
    return out


def padded_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Outputs ``(B, T, directions * H)`` of a batch-first LSTM/GRU on right-padded ``x``.

    Equal to the packed computation at every position before each row's length; positions
    after it hold values nobody should read (mask them, as :func:`masked_padded_rnn` does).
    """
    if not rnn.batch_first:
        raise ValueError("padded_rnn expects a batch_first RNN")
    steps = x.shape[1]
    # The index must live with x: batches keep their lengths on the CPU (CUDA training).
    index = reverse_index(lengths.to(x.device), steps) if rnn.bidirectional else None
    h = x
    for layer in range(rnn.num_layers):
        if layer > 0 and rnn.dropout and rnn.training:
            h = nn.functional.dropout(h, rnn.dropout, training=True)
        forward = _one_direction(rnn, h, layer, "")
        if index is None:
            h = forward
            continue
        backward = _one_direction(rnn, gather_time(h, index), layer, "_reverse")
        h = torch.cat([forward, gather_time(backward, index)], dim=-1)
    return h


def masked_padded_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`padded_rnn` with zeros past each length, as ``pad_packed_sequence`` gives."""
    out = padded_rnn(rnn, x, lengths)
    mask = torch.arange(x.shape[1], device=out.device)[None, :] < lengths.to(out.device)[:, None]
    return out * mask.unsqueeze(-1).to(out.dtype)


def _records_gradients(rnn: nn.RNNBase) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in rnn.parameters())


PACKING_FILL = 0.6
"""Tagging packs a batch whose real positions fill less than this share of it: a batch of
very different lengths (GROBID name-header at batch 256: 1 to 100+ tokens) ran 2x slower
padded, where sorted batches of similar lengths run faster padded."""


def _packs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> bool:
    """Whether to pack: CUDA tagging always, CPU tagging of mostly-padding batches (see the
    module docstring and ``PACKING_FILL``), training never."""
    if _records_gradients(rnn):
        return False
    return x.is_cuda or int(lengths.sum()) < PACKING_FILL * x.shape[0] * x.shape[1]


def _packed(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor):
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return rnn(packed)


@_fp32_lstm_where_bf16_fails
def rnn_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Outputs ``(B, T, directions * H)`` with zeros past each length, padding never read."""
    if int(lengths.min()) == x.shape[1]:  # no padding at all (one sequence): the fused call
        return rnn(x)[0]
    if _packs(rnn, x, lengths):
        out, _ = _packed(rnn, x, lengths)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]
    groups = length_groups(lengths) if _records_gradients(rnn) and not x.is_cuda else None
    if groups is None:
        return masked_padded_rnn(rnn, x, lengths)
    return _grouped_outputs(rnn, x, lengths, groups)


STEP_COST_IN_ROWS = 3.3
"""One time step of a CPU LSTM call costs about as much as 3.3 more rows in it (oneDNN, word
BiLSTM 150 -> 2 x 100: 22 us a step at batch 1, 185 us at batch 32, both directions)."""
GROUP_COST_IN_ROW_STEPS = 60.0
"""Fixed cost of one more group (its calls, gathers and concatenation), in row-steps."""
THREE_GROUP_ROWS = 128
"""Largest batch whose three-group split is searched (every pair of cuts: rows squared cells,
done each training step); larger batches are split in two at most."""


def length_groups(lengths: torch.Tensor) -> list[torch.Tensor] | None:
    """Rows of a training batch in two or three groups of similar lengths, each to be run
    padded to its own longest row, when the cost model above says that pays; None otherwise.

    Length buckets keep batches partly random (better models, see ``TrainConfig.bucket_batches``),
    so a batch can mix a 900-token GROBID header with 31 short ones: padded as one block, the
    BiLSTM would run 32 rows for 900 steps instead of one.
    """
    sizes = lengths.detach().cpu().numpy()
    order = np.argsort(sizes, kind="stable")
    s = sizes[order].astype(np.float64)
    rows = len(s)
    if rows < 2:
        return None
    cost = lambda n, longest: longest * (STEP_COST_IN_ROWS + n)  # noqa: E731
    best_cost, best_cuts = cost(rows, s[-1]), ()
    k = np.arange(1, rows)  # two groups: [0, k) and [k, rows)
    two = cost(k, s[k - 1]) + cost(rows - k, s[-1]) + GROUP_COST_IN_ROW_STEPS
    if two.min() < best_cost:
        best_cost, best_cuts = float(two.min()), (int(k[two.argmin()]),)
    if rows <= THREE_GROUP_ROWS:  # three groups: [0, i), [i, j), [j, rows)
        i, j = np.meshgrid(np.arange(1, rows), np.arange(1, rows), indexing="ij")
        three = cost(i, s[i - 1]) + cost(j - i, s[j - 1]) + cost(rows - j, s[-1]) + 2 * GROUP_COST_IN_ROW_STEPS
        three = np.where(j > i, three, np.inf)
        if three.min() < best_cost:
            flat = int(three.argmin())
            best_cuts = (int(i.flat[flat]), int(j.flat[flat]))
    if not best_cuts:
        return None
    bounds = (0, *best_cuts, rows)
    order_t = torch.from_numpy(order)
    return [order_t[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _grouped_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor, groups: list[torch.Tensor]) -> torch.Tensor:
    """:func:`masked_padded_rnn` run group by group, each group padded to its own longest row."""
    steps = x.shape[1]

    def run(part: torch.Tensor, part_lengths: torch.Tensor) -> torch.Tensor:
        out = masked_padded_rnn(rnn, part, part_lengths)
        return nn.functional.pad(out, (0, 0, 0, steps - part.shape[1]))  # back to the batch's steps

    return _in_groups(run, x, lengths, groups)


def _in_groups(run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x: torch.Tensor, lengths: torch.Tensor, groups: list[torch.Tensor]) -> torch.Tensor:
    """``run(rows, their lengths)`` on each group of rows, cut to the group's longest row, the
    results put back in the batch's row order. Gradients flow through the indexing."""
    lengths = lengths.to(x.device)
    groups = [group.to(x.device) for group in groups]
    outputs = []
    for group in groups:
        group_lengths = lengths[group]
        outputs.append(run(x[group, : int(group_lengths.max())], group_lengths))
    order = torch.cat(groups)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return torch.cat(outputs)[inverse]


@_fp32_lstm_where_bf16_fails
def rnn_final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The last layer's final state of each direction ``(B, directions * H)``; lengths >= 1."""
    if x.is_cuda and not _records_gradients(rnn):  # groups of similar lengths do better on the CPU
        _, h_n = _packed(rnn, x, lengths)
        if isinstance(h_n, tuple):
            h_n = h_n[0]
        last = h_n[-2:] if rnn.bidirectional else h_n[-1:]
        return torch.cat(list(last), dim=-1)
    return final_states(rnn, x, lengths)


LENGTH_GROUPS = 2
"""Groups of rows of similar length that :func:`final_states` runs apart (each between
``MIN_GROUP_ROWS`` and ``MAX_GROUP_ROWS`` rows; measured on CoNLL-2003 character rows: a
training batch's 300 distinct tokens in 2 groups trained 4 % faster than in 4, one epoch three
times each, 18.2k against 17.5k tokens/s)."""
MIN_GROUP_ROWS = 64
MAX_GROUP_ROWS = 1024


def final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``(B, directions * H)``: the last layer's final state of each direction, as ``h_n`` of
    the packed RNN (forward at the last real step, backward after reading back to step 0).
    Rows must have length >= 1. Rows run in groups of similar length (module docstring)."""
    rows = x.shape[0]
    group = min(max(-(-rows // LENGTH_GROUPS), MIN_GROUP_ROWS), MAX_GROUP_ROWS)
    if rows <= group:
        return _final_states(rnn, x, lengths)
    order = torch.argsort(lengths.to(x.device), stable=True)
    groups = [order[start : start + group] for start in range(0, rows, group)]
    return _in_groups(lambda part, part_lengths: _final_states(rnn, part, part_lengths), x, lengths, groups)


def _final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    out = padded_rnn(rnn, x, lengths)
    hidden = rnn.hidden_size
    last = (lengths.to(out.device) - 1).clamp(min=0)
    forward_final = out[torch.arange(out.shape[0], device=out.device), last, :hidden]
    if not rnn.bidirectional:
        return forward_final
    return torch.cat([forward_final, out[:, 0, hidden:]], dim=-1)
