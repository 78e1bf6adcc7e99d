"""When a tagging call runs a recurrent layer over a ``PackedSequence`` rather than padded rows.

Packing keeps padding out of the computation but takes PyTorch's step-by-step kernel on the
CPU, so it pays only for batches of many rows that are mostly padding (and always on CUDA,
where cuDNN runs packed batches natively). Training never packs (:mod:`textorch.models.padded_rnn`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence


def records_gradients(rnn: nn.RNNBase) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in rnn.parameters())


PACKED_TOKEN_COST = 2.1
PACKED_STEP_COST = 11.0
"""What a packed tagging call costs, in row-steps of a padded one (one row for one time step):
each real token ``PACKED_TOKEN_COST`` and each time step ``PACKED_STEP_COST`` more (PyTorch's
step-by-step kernel), fitted on the word BiLSTM. Packing wins on many rows of mostly short
sequences and loses on few rows at any fill, which a plain fill threshold (GRUs'
``PACKING_FILL``) gets wrong (docs/performance.md)."""


PACKING_FILL = 0.6
"""GRUs pack a batch whose real positions fill less than this share of it. PyTorch has no
fused oneDNN GRU: padded or packed, it steps through time, and packed it skips the padding."""


def packs(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> bool:
    """Whether to pack: CUDA tagging always, CPU tagging where padding would cost more (LSTMs:
    the cost model above; GRUs: ``PACKING_FILL``), training never."""
    if records_gradients(rnn):
        return False
    if x.is_cuda:
        return True
    rows, steps = x.shape[0], x.shape[1]
    if isinstance(rnn, nn.LSTM):
        return PACKED_TOKEN_COST * int(lengths.sum()) + PACKED_STEP_COST * steps < rows * steps
    return int(lengths.sum()) < PACKING_FILL * rows * steps


def run_packed(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor):
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return rnn(packed)
