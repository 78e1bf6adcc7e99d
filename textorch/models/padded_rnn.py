"""Recurrent layers over right-padded batches, exact on every real step, without packing.

Packing (``pack_padded_sequence``) keeps padding out of a bidirectional RNN, but on the CPU it
takes PyTorch's step-by-step kernel instead of the fused oneDNN one, in training and in
tagging alike. Tagging still packs on CUDA, where cuDNN runs packed batches natively.

Unpacked, each direction runs on padded input: the forward direction never reads
what follows a step, and the backward direction reads every sequence reversed *within its own
length* (a gather), so neither ever sees padding. The parameters are the module's own, so
training updates the same weights and saved models are unchanged.

Character encoders see rows of very different lengths (CoNLL tokens: 1 to 20+ characters,
mostly under 8), so :func:`final_states` sorts rows by length and runs a few groups, each
padded to its own longest row, cut where a cost model says
(:mod:`textorch.models.length_groups`). Measurements: docs/performance.md.

Which of the CPU fast paths here a call takes (weights laid out for oneDNN, row buckets, the
character rows' length groups) is the call's decision (:mod:`textorch.models.cpu_routes`), read
once per recurrent call; with every one off, each direction is ``torch.lstm`` / ``torch.gru`` on
the padded rows.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from textorch.models import cpu_routes, onednn_lstm
from textorch.models.cpu_routes import CpuRoutes
from textorch.models.costs import FINAL_STATE_GROUP_COSTS, TRAINING_GROUP_COSTS
from textorch.models.length_groups import in_length_groups, length_groups
from textorch.models.row_buckets import bucketed_rows, in_row_buckets
from textorch.models.rows import permute_rows, select_rows

# What lived in this module before it was split by concern, importable from here as before.
from textorch.models.costs import GroupCosts as GroupCosts


def reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T) positions that read each row backwards within its length; padding stays in place."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(0)
    n = lengths.to(t.device).unsqueeze(1)
    return torch.where(t < n, n - 1 - t, t)


def gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[b, index[b, t]]`` for every row and step (``index`` is ``(B, T)``, ``x`` ``(B, T, D)``).

    Rows of the flattened ``(B*T, D)`` tensor picked by one index (``index_select``, see
    :mod:`textorch.models.rows`): ``gather`` with an index expanded over D was slower."""
    batch, steps = index.shape
    return select_rows(x.reshape(batch * x.shape[1], -1), _flat_time_index(index, x.shape[1])).reshape(batch, steps, -1)


def _flat_time_index(index: torch.Tensor, steps: int) -> torch.Tensor:
    """Rows of the flattened ``(B*steps, D)`` tensor that ``index`` (``(B, T)``) points at."""
    offsets = torch.arange(index.shape[0], device=index.device).unsqueeze(1) * steps
    return (index + offsets).reshape(-1)


def reverse_in_time(x: torch.Tensor, flat_reverse: torch.Tensor) -> torch.Tensor:
    """Each row of ``x`` (``(B, T, D)``) read backwards within its length; ``flat_reverse`` is
    ``_flat_time_index(reverse_index(...), T)``. Reversing twice is the identity, so the index
    is its own inverse and the gradient is one more row copy (:func:`permute_rows`)."""
    batch, steps = x.shape[:2]
    return permute_rows(x.reshape(batch * steps, -1), flat_reverse, flat_reverse).reshape(batch, steps, -1)


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
    """Whether :func:`rnn_outputs` / :func:`rnn_final_states` must run with autocast off and ``x``
    in float32: this CPU's LSTM cannot take bfloat16 (:func:`cpu_lstm_takes_bf16`). ``--precision
    bf16`` then still works, its recurrent layers in fp32, its matrix products in bfloat16."""
    return (isinstance(rnn, nn.LSTM) and x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not cpu_lstm_takes_bf16())


def _one_direction(rnn: nn.RNNBase, x: torch.Tensor, layer: int, suffix: str, routes: CpuRoutes) -> torch.Tensor:
    """One direction of one layer; on the CPU with rows padded to a bucket where ``routes`` say
    so (``bucketed_rows``)."""
    if routes.row_buckets and not x.is_cuda and bucketed_rows(x.shape[0]) != x.shape[0]:
        return in_row_buckets(lambda rows: _one_direction_exact(rnn, rows, layer, suffix, routes), x, row_dim=0)
    return _one_direction_exact(rnn, x, layer, suffix, routes)


def _one_direction_exact(rnn: nn.RNNBase, x: torch.Tensor, layer: int, suffix: str, routes: CpuRoutes) -> torch.Tensor:
    if routes.laid_out_lstm and onednn_lstm.applies(rnn, x):
        return onednn_lstm.time_major_direction(rnn, x.transpose(0, 1), layer, suffix).transpose(0, 1)
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


def padded_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor, routes: CpuRoutes | None = None) -> torch.Tensor:
    """Outputs ``(B, T, directions * H)`` of a batch-first LSTM/GRU on right-padded ``x``.

    Equal to the packed computation at every position before each row's length; positions
    after it hold values nobody should read (mask them, as :func:`masked_padded_rnn` does).
    ``routes``: the call's CPU routes (default: :func:`cpu_routes.current`).
    """
    routes = cpu_routes.current() if routes is None else routes
    if not rnn.batch_first:
        raise ValueError("padded_rnn expects a batch_first RNN")
    steps = x.shape[1]
    reverse = None
    if rnn.bidirectional:
        # Rows without padding read backwards by a flip (cheaper than building and applying
        # the index, which one-sequence calls notice). Lengths are read only where they live on the
        # CPU (batches keep them there; reading CUDA ones would wait for the device).
        if lengths.device.type == "cpu" and int(lengths.min()) == steps:
            reverse = functools.partial(torch.flip, dims=(1,))
        else:  # the index must live with x
            index = _flat_time_index(reverse_index(lengths.to(x.device), steps), steps)
            reverse = functools.partial(reverse_in_time, flat_reverse=index)
    h = x
    for layer in range(rnn.num_layers):
        if layer > 0 and rnn.dropout and rnn.training:
            h = nn.functional.dropout(h, rnn.dropout, training=True)
        forward = _one_direction(rnn, h, layer, "", routes)
        if reverse is None:
            h = forward
            continue
        backward = _one_direction(rnn, reverse(h), layer, "_reverse", routes)
        h = torch.cat([forward, reverse(backward)], dim=-1)
    return h


def masked_padded_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor,
                      routes: CpuRoutes | None = None) -> torch.Tensor:
    """:func:`padded_rnn` with zeros past each length, as ``pad_packed_sequence`` gives."""
    out = padded_rnn(rnn, x, lengths, routes)
    mask = torch.arange(x.shape[1], device=out.device)[None, :] < lengths.to(out.device)[:, None]
    return out * mask.unsqueeze(-1).to(out.dtype)


def records_gradients(rnn: nn.RNNBase) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in rnn.parameters())


def run_packed(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor):  # noqa: ANN201
    """``rnn`` over ``x`` packed: tagging on CUDA, where cuDNN skips the padding natively."""
    return rnn(pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False))


def rnn_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Outputs ``(B, T, directions * H)`` with zeros past each length, padding never read."""
    if _needs_fp32_lstm(rnn, x):  # this CPU's LSTM cannot take bfloat16: fp32 recurrent layers
        with torch.autocast("cpu", enabled=False):
            return rnn_outputs(rnn, x.float(), lengths)
    routes = cpu_routes.current()
    if int(lengths.min()) == x.shape[1]:  # no padding at all (one sequence): nothing to mask
        # Direction by direction where the LSTM's weights are kept laid out (onednn_lstm: no
        # reorder per call), else the fused call.
        laid_out = routes.laid_out_lstm and onednn_lstm.applies(rnn, x)
        return padded_rnn(rnn, x, lengths, routes) if laid_out else rnn(x)[0]
    if x.is_cuda and not records_gradients(rnn):  # cuDNN runs packed batches natively
        out, _ = run_packed(rnn, x, lengths)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]
    # Training on the CPU: rows of very different lengths (random batches) in a few groups, each
    # padded to its own longest row. Tagging cuts its batches before this (inference_batches).
    groups = length_groups(lengths, TRAINING_GROUP_COSTS) if records_gradients(rnn) and not x.is_cuda else None
    if groups is None:
        return masked_padded_rnn(rnn, x, lengths, routes)
    return in_length_groups(lambda part, part_lengths: masked_padded_rnn(rnn, part, part_lengths, routes), [x], lengths,
                            groups, steps=x.shape[1])


def rnn_final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The last layer's final state of each direction ``(B, directions * H)``; lengths >= 1."""
    if _needs_fp32_lstm(rnn, x):  # as in rnn_outputs
        with torch.autocast("cpu", enabled=False):
            return rnn_final_states(rnn, x.float(), lengths)
    if x.is_cuda and not records_gradients(rnn):  # groups of similar lengths do better on the CPU
        _, h_n = run_packed(rnn, x, lengths)
        if isinstance(h_n, tuple):
            h_n = h_n[0]
        last = h_n[-2:] if rnn.bidirectional else h_n[-1:]
        return torch.cat(list(last), dim=-1)
    return final_states(rnn, x, lengths)


def final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor, routes: CpuRoutes | None = None) -> torch.Tensor:
    """``(B, directions * H)``: the last layer's final state of each direction, as ``h_n`` of
    the packed RNN (forward at the last real step, backward after reading back to step 0).
    Rows must have length >= 1. Rows run in groups of similar length (:func:`length_groups`)
    where ``routes`` (default: :func:`cpu_routes.current`) say so (``char_length_groups``).

    Token lengths have a long tail (most under 8 characters, a few of 20-60), so one padded
    block, or halves, would run several times the character steps there are."""
    routes = cpu_routes.current() if routes is None else routes
    groups = length_groups(lengths, FINAL_STATE_GROUP_COSTS) if routes.char_length_groups else None
    if groups is None:
        return _final_states(rnn, x, lengths, routes)
    return in_length_groups(lambda part, part_lengths: _final_states(rnn, part, part_lengths, routes), [x], lengths,
                            groups)


def _final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor, routes: CpuRoutes) -> torch.Tensor:
    out = padded_rnn(rnn, x, lengths, routes)
    hidden = rnn.hidden_size
    last = (lengths.to(out.device) - 1).clamp(min=0)
    forward_final = gather_time(out, last.unsqueeze(1)).squeeze(1)[:, :hidden]
    if not rnn.bidirectional:
        return forward_final
    return torch.cat([forward_final, out[:, 0, hidden:]], dim=-1)
