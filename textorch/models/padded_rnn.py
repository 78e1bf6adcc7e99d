"""Recurrent layers over right-padded batches, exact on every real step, without packing.

Packing (``pack_padded_sequence``) keeps padding out of a bidirectional RNN, but on the CPU it
takes PyTorch's step-by-step kernel instead of the fused oneDNN one: forward plus backward of a
CoNLL-2003 batch ran 1.45-1.6x slower packed (CoNLL training went from 13.0k to 16.0k tokens/s),
and tagging too ran 5-50 % slower packed (word BiLSTM, sorted batches of 8-256). Tagging still
packs on CUDA, where cuDNN runs packed batches natively, and on the CPU for batches of many
rows that are mostly padding (``PACKED_TOKEN_COST``; GRUs: ``PACKING_FILL``).

Unpacked, each direction runs on padded input: the forward direction never reads
what follows a step, and the backward direction reads every sequence reversed *within its own
length* (a gather), so neither ever sees padding. The parameters are the module's own, so
training updates the same weights and saved models are unchanged.

Character encoders see rows of very different lengths (CoNLL tokens: 1 to 20+ characters,
mostly under 8), so :func:`final_states` sorts rows by length and runs a few groups, each
padded to its own longest row, cut where a cost model says (:func:`length_groups`). Two equal
halves were 1.4x faster than one padded block in training and 1.7x faster than packing when
tagging; cuts from the cost model ran a CoNLL-2003 training epoch another 9-11 % faster
(padded character steps 2.1x -> 1.5x the real ones).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from textorch.models import onednn_lstm
from textorch.models.rows import inverse_permutation, permute_rows, select_rows


def reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T) positions that read each row backwards within its length; padding stays in place."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(0)
    n = lengths.to(t.device).unsqueeze(1)
    return torch.where(t < n, n - 1 - t, t)


def gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[b, index[b, t]]`` for every row and step (``index`` is ``(B, T)``, ``x`` ``(B, T, D)``).

    Rows of the flattened ``(B*T, D)`` tensor picked by one index (``index_select``, see
    :mod:`textorch.models.rows`): ``gather`` with an index expanded over D was 2x slower."""
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
    return _in_row_buckets(lambda rows: _one_direction_exact(rnn, rows, layer, suffix), x, row_dim=0)


def _in_row_buckets(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, row_dim: int) -> torch.Tensor:
    """``run(x)``, on the CPU with the rows of ``x`` (dimension ``row_dim``) padded with zeros up
    to :func:`bucketed_rows`; the padding rows' outputs are dropped."""
    rows = x.shape[row_dim]
    padded = rows if x.is_cuda else bucketed_rows(rows)
    if padded == rows:
        return run(x)
    widths = [0, 0] * (x.dim() - 1 - row_dim) + [0, padded - rows]  # F.pad counts from the last dimension
    return run(nn.functional.pad(x, widths)).narrow(row_dim, 0, rows)


def _one_direction_exact(rnn: nn.RNNBase, x: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    if onednn_lstm.applies(rnn, x):
        return onednn_lstm.lstm_direction(rnn, x, layer, suffix)
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
    reverse = None
    if rnn.bidirectional:
        # Rows without padding read backwards by a flip (one-sequence calls: 30-40 us less
        # than building and applying the index). Lengths are read only where they live on the
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
        forward = _one_direction(rnn, h, layer, "")
        if reverse is None:
            h = forward
            continue
        backward = _one_direction(rnn, reverse(h), layer, "_reverse")
        h = torch.cat([forward, reverse(backward)], dim=-1)
    return h


def masked_padded_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`padded_rnn` with zeros past each length, as ``pad_packed_sequence`` gives."""
    out = padded_rnn(rnn, x, lengths)
    mask = torch.arange(x.shape[1], device=out.device)[None, :] < lengths.to(out.device)[:, None]
    return out * mask.unsqueeze(-1).to(out.dtype)


def _records_gradients(rnn: nn.RNNBase) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in rnn.parameters())


PACKED_TOKEN_COST = 2.1
PACKED_STEP_COST = 11.0
"""What a packed tagging call costs, in row-steps of a padded one (one row for one time step):
each real token ``PACKED_TOKEN_COST`` and each time step ``PACKED_STEP_COST`` more (PyTorch's
step-by-step kernel). Fitted on the word BiLSTM 150 -> 2 x 100 (one thread): a padded row-step
took 3.0 us, packed 6.4 us a token and 34 a step. Packed beat padded by 2-3x on 64 rows of
mostly short sequences (fill 7-15 %), lost by 1.2-2x on 8-16 rows at any fill and on 64 rows
above half full; the rule GRUs keep (``PACKING_FILL``) packed GROBID date's test file at batch
256 (64 rows of 1-8 tokens, 48 % full): 4.44 ms a pass against 3.52 with this one
(name-header 25.1 -> 23.7 ms, CoNLL-2003 278 -> 273 ms at batch 256)."""

PACKING_FILL = 0.6
"""GRUs pack a batch whose real positions fill less than this share of it. PyTorch has no
fused oneDNN GRU: padded or packed, it steps through time, and packed it skips the padding
(0.13-0.72x the padded time on 8-64 rows 7-42 % full)."""


def _packs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> bool:
    """Whether to pack: CUDA tagging always, CPU tagging where padding would cost more (LSTMs:
    the cost model above; GRUs: ``PACKING_FILL``), training never."""
    if _records_gradients(rnn):
        return False
    if x.is_cuda:
        return True
    rows, steps = x.shape[0], x.shape[1]
    if isinstance(rnn, nn.LSTM):
        return PACKED_TOKEN_COST * int(lengths.sum()) + PACKED_STEP_COST * steps < rows * steps
    return int(lengths.sum()) < PACKING_FILL * rows * steps


def _packed(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor):
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return rnn(packed)


@_fp32_lstm_where_bf16_fails
def rnn_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Outputs ``(B, T, directions * H)`` with zeros past each length, padding never read."""
    if int(lengths.min()) == x.shape[1]:  # no padding at all (one sequence): nothing to mask
        # Direction by direction where the LSTM's weights are kept laid out (onednn_lstm: a
        # one-token call 154-164 -> 75-85 us), else the fused call.
        return padded_rnn(rnn, x, lengths) if onednn_lstm.applies(rnn, x) else rnn(x)[0]
    if _packs(rnn, x, lengths):
        out, _ = _packed(rnn, x, lengths)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]
    groups = length_groups(lengths) if _records_gradients(rnn) and not x.is_cuda else None
    if groups is None:
        return masked_padded_rnn(rnn, x, lengths)
    return _grouped_outputs(rnn, x, lengths, groups)


def time_major_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor | None:
    """Tagging's outputs ``(T, B, directions * H)`` of an LSTM over batch-first, right-padded ``x``,
    time-major; positions past a row's length hold finite values nobody may read. None where
    this does not apply (see below): then :func:`rnn_outputs`.

    Why: oneDNN's recurrent layer reads and writes time-major tensors, so the batch-first path
    copies each direction's input and output across, reverses the backward direction on both
    sides, and masks; the tagger's dense layer and CRF are as happy with time-major rows. On
    CoNLL-2003's test set at batch 32 (one thread, batches built beforehand) a prototype of
    this path ran the network's part of tagging (word BiLSTM, dense layer, CRF) in 172.7
    instead of 192.3 ms; whole tagging calls took 5 % less time. Only where the
    LSTM's weights are kept laid out (:func:`onednn_lstm.applies`: CPU inference in float32, or
    in bfloat16 under ``--precision bf16``, whose outputs are then bfloat16), and not for
    batches that :func:`rnn_outputs` would pack (mostly padding)."""
    if lengths.device.type != "cpu" or not onednn_lstm.applies(rnn, x):  # applies: LSTMs only
        return None
    rows, steps = x.shape[0], x.shape[1]
    padding = int(lengths.min()) < steps
    if padding and _packs(rnn, x, lengths):
        return None
    flat_reverse = _time_major_reverse_index(lengths, steps) if rnn.bidirectional and padding else None
    return time_major_layers(rnn, _time_major_copy(x), flat_reverse)


def time_major_layers(rnn: nn.RNNBase, h: torch.Tensor, flat_reverse: torch.Tensor | None) -> torch.Tensor:
    """``(T, B, directions * H)``: every layer of ``rnn`` over time-major ``h`` ``(T, B, D)`` in the
    LSTM's format (:func:`_time_major_copy`), each row read backwards within its length by
    ``flat_reverse`` (:func:`_time_major_reverse_index`; None where no row is padded). Call only
    where :func:`onednn_lstm.applies` (:func:`time_major_outputs`, and a one-sequence call's
    :class:`textorch.models.one_sequence.OneSequenceTagger`, which has no padding to look for)."""
    for layer in range(rnn.num_layers):
        forward, backward = _time_major_directions(rnn, h, layer, flat_reverse)
        h = forward if backward is None else torch.cat([forward, _reversed_time_major(backward, flat_reverse)], dim=-1)
    return h


def _time_major_copy(x: torch.Tensor) -> torch.Tensor:
    """Batch-first ``x`` as a contiguous time-major tensor in the format the LSTM runs in
    (:func:`onednn_lstm.call_dtype`; callers have checked :func:`onednn_lstm.applies`): one
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
    ``reverse_index[b, t]``: :func:`reverse_index` for time-major rows, whose ``lengths`` are on
    the CPU. Built in NumPy: 11 against 27 us in PyTorch for a one-sentence character table,
    where each small operator costs more than its arithmetic. :func:`reverse_index` itself stays
    in PyTorch: the ONNX export traces it into the graph, and training builds it on the device."""
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
    """One direction over time-major ``h``, its rows padded to a bucket as in :func:`_one_direction`."""
    return _in_row_buckets(lambda rows: onednn_lstm.time_major_direction(rnn, rows, layer, suffix), h, row_dim=1)


@dataclass(frozen=True)
class GroupCosts:
    """What running rows of different lengths in separate padded calls costs, in row-steps
    (one row for one time step): a call on ``n`` rows padded to ``T`` steps costs
    ``T * (n + step_cost_in_rows)``, and each group beyond the first ``group_cost`` more."""

    step_cost_in_rows: float
    group_cost: float
    max_groups: int


WORD_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=60.0, max_groups=3)
"""Word BiLSTM 150 -> 2 x 100 (oneDNN): one time step costs about as much as 3.3 more rows
(22 us a step at batch 1, 185 us at batch 32, both directions)."""


def length_groups(lengths: torch.Tensor, costs: GroupCosts = WORD_GROUP_COSTS) -> list[torch.Tensor] | None:
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
    character tables stop here: the search took 70-80 us a call, three calls of a 3.2 ms
    GROBID date pass at batch 32."""
    longest, shortest = int(sizes.max()), int(sizes.min())
    one_block = longest * (len(sizes) + costs.step_cost_in_rows)
    split_at_least = int(sizes.sum()) + costs.step_cost_in_rows * (longest + shortest) + costs.group_cost
    return one_block <= split_at_least


def _grouped_outputs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor, groups: list[torch.Tensor]) -> torch.Tensor:
    """:func:`masked_padded_rnn` run group by group, each group padded to its own longest row."""
    return in_length_groups(lambda part, part_lengths: masked_padded_rnn(rnn, part, part_lengths), [x], lengths,
                            groups, steps=x.shape[1])


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


FINAL_STATE_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=600.0, max_groups=4)
"""Character BiLSTM 25 -> 2 x 25 over the distinct tokens of a batch: a new group costs about
0.5 ms a direction in calls and gathers (forward plus backward), as much as 600 row-steps."""


def final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``(B, directions * H)``: the last layer's final state of each direction, as ``h_n`` of
    the packed RNN (forward at the last real step, backward after reading back to step 0).
    Rows must have length >= 1. Rows run in groups of similar length (:func:`length_groups`).

    Token lengths have a long tail (CoNLL-2003: most under 8 characters, a few of 20-60), so one
    padded block, or halves, ran 2-3x the character steps there are."""
    groups = length_groups(lengths, FINAL_STATE_GROUP_COSTS)
    if groups is None:
        return _final_states(rnn, x, lengths)
    return in_length_groups(lambda part, part_lengths: _final_states(rnn, part, part_lengths), [x], lengths, groups)


def _final_states(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    if rnn.num_layers == 1 and lengths.device.type == "cpu" and onednn_lstm.applies(rnn, x):
        return _time_major_final_states(rnn, x, lengths)
    out = padded_rnn(rnn, x, lengths)
    hidden = rnn.hidden_size
    last = (lengths.to(out.device) - 1).clamp(min=0)
    forward_final = gather_time(out, last.unsqueeze(1)).squeeze(1)[:, :hidden]
    if not rnn.bidirectional:
        return forward_final
    return torch.cat([forward_final, out[:, 0, hidden:]], dim=-1)


BOTH_DIRECTIONS_MAX_WORK = 450_000
"""Largest ``rows * steps * hidden * (inputs + hidden)`` (a direction's multiply-adds over 4) for
which :func:`_time_major_final_states` runs both directions as one oneDNN call
(:func:`onednn_lstm.both_directions_time_major`): one call's fixed cost and a gather saved, the
other direction's arithmetic done again. Character BiLSTM 25 -> 2 x 25, final states, two calls /
one call (one thread, the median of 9 x 200): 4, 8, 16 and 32 rows of 8 characters 1.33, 1.39,
1.18 and 1.19; 32 x 10 (400k) 1.13, 48 x 10 (600k) 1.02, 64 x 10 1.01, 80 x 11 (1.1M) 0.97.
The word BiLSTM's outputs keep two calls: one sequence of 150 -> 2 x 100 gained 10 % at 2-4
tokens and lost from 8 on (0.98 at 8, 0.90 at 14), and its outputs must be split again."""


def both_directions_pay(rnn: nn.RNNBase, rows: int, steps: int, inputs: int) -> bool:
    """Whether a bidirectional layer over ``rows`` x ``steps`` of ``inputs`` features runs its two
    directions as one call (``BOTH_DIRECTIONS_MAX_WORK``)."""
    return rnn.bidirectional and rows * steps * rnn.hidden_size * (inputs + rnn.hidden_size) <= BOTH_DIRECTIONS_MAX_WORK


def both_directions_time_major(rnn: nn.LSTM, side_by_side: torch.Tensor) -> torch.Tensor:
    """``(T, B, 2H)``: :func:`onednn_lstm.both_directions_time_major` of the first layer over
    ``side_by_side`` ``(T, B, 2D)`` (each row, then each row read backwards within its length),
    its rows padded to a bucket as every CPU recurrent call's are."""
    return _in_row_buckets(lambda part: onednn_lstm.both_directions_time_major(rnn, part, 0), side_by_side, row_dim=1)


def _both_directions(rnn: nn.RNNBase, h: torch.Tensor, flat_reverse: torch.Tensor | None) -> torch.Tensor | None:
    """``(T, B, 2H)``: both directions of a one-layer bidirectional LSTM over time-major ``h`` as
    one call, the backward one in the order it read (as :func:`_time_major_directions`), where
    :func:`both_directions_pay`; else None."""
    steps, rows, inputs = h.shape
    if not both_directions_pay(rnn, rows, steps, inputs):
        return None
    return both_directions_time_major(rnn, torch.cat([h, _reversed_time_major(h, flat_reverse)], dim=-1))


def _time_major_final_states(rnn: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """:func:`_final_states` of a one-layer LSTM at CPU inference, run time-major as oneDNN
    reads and writes it (see :func:`time_major_outputs`).

    Only each row's last real step is read from either direction: the forward one there has
    read the row, and so has the backward one, which reads the row reversed within its length.
    The batch-first path reversed the backward outputs back, concatenated both directions and
    gathered from the result, and transposed every direction's input and output; a character
    table of one CoNLL-2003 sentence (12 tokens) took 173 instead of 300 us, GROBID date's test
    file (79 tokens) 460-520 instead of 540-700 us. Small tables (one-sequence calls) run both
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
