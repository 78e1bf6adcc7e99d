"""Batches for tagging and classifying: sorted by length, then, on the CPU, cut where their
lengths spread.

Sorting keeps most batches to one or two lengths, but the batches of the longest sequences
(and every batch of a small file, or of a large ``batch_size``) still mix a few long sequences
with many short ones: GROBID name-header's test file at batch 256 is one batch of 145
sequences from 1 to over 100 tokens. Such a batch either packs (PyTorch's step-by-step LSTM
kernel instead of oneDNN's fused one) or pads, and every stage after the BiLSTM (the dense
layer, the CRF, the character vectors placed per position) then runs over the whole padded
block. Cutting it into a few groups of similar length, each run as its own batch, costs one
more network call per group and saves that padding.

Measured in one process, alternating with and without the cuts (BidLSTM_CRF, labels only,
one thread, tokens/s): GROBID name-header batch 256 40.9k -> 112.5k, batch 32 82.1k -> 94.8k;
CoNLL-2003 batch 256 161.5k -> 185.2k, batch 32 162.1k -> 165.7k; GROBID date (60 sequences of
1 to about 10 tokens) unchanged within noise. Text classification with the GRU classifier (texts
per second): licences (2 to 300 tokens) batch 256 2,918 -> 3,597, batch 32 3,515 -> 3,617;
citations (at most 150 tokens) unchanged. Outputs are unchanged: every sequence is run on its
own row, whatever else shares its call.

``batch_size`` keeps its meaning, the most sequences one network call takes: groups are
parts of a batch, never larger. Only CPU inference of models without a transformer is cut (the
costs were measured there; a tagging transformer's windows are grouped by
:meth:`textorch.models.transformer.TransformerEmbedder.windows`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from textorch.data.batching import sorted_batches
from textorch.models.padded_rnn import GroupCosts, length_groups

INFERENCE_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=160.0, max_groups=8)
"""A BiLSTM-CRF tagging call on the CPU: a time step costs about as much as 3.3 more rows (the
word BiLSTM's figure, see ``padded_rnn.WORD_GROUP_COSTS``) and one more call (encoder calls,
dense layer, Viterbi) about 160 row-steps. Group costs of 80 to 400 all gave the gains above
within noise (name-header batch 256: 93-113k tokens/s; CoNLL-2003 batch 256: 183-188k), as did
at most 4 or 16 groups instead of 8."""


def inference_batches(lengths: Sequence[int], batch_size: int, costs: GroupCosts | None) -> list[list[int]]:
    """Positions into ``lengths`` in batches of at most ``batch_size``, sorted by length; each
    batch cut where ``costs`` (:func:`group_costs`; None: never) says that pays."""
    if len(lengths) == 1:  # one-sequence calls (a server's lone requests)
        return [[0]]
    batches = sorted_batches(lengths, batch_size)
    if costs is None:
        return batches
    sizes = np.asarray(lengths)
    cut: list[list[int]] = []
    for batch in batches:
        groups = length_groups(torch.from_numpy(sizes[batch]), costs)
        if groups is None:
            cut.append(batch)
        else:
            cut += [[batch[k] for k in group.tolist()] for group in groups]
    return cut


def group_costs(device: torch.device, has_transformer: bool, engine_costs: GroupCosts | None = None) -> GroupCosts | None:
    """What cutting a batch costs for this model: None (no cuts) on GPUs and for transformers,
    where nothing was measured; an engine's own figures (the ONNX engine's calls cost less)
    when it has some; else :data:`INFERENCE_GROUP_COSTS`."""
    if device.type != "cpu" or has_transformer:
        return None
    return engine_costs or INFERENCE_GROUP_COSTS
