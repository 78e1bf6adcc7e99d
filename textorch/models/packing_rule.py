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
