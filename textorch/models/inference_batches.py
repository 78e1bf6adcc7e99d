"""Batches for tagging and classifying: sorted by length, then, on the CPU, cut where their
lengths spread.

Sorting keeps most batches to one or two lengths, but the batches of the longest sequences
(and every batch of a small file, or of a large ``batch_size``) still mix a few long sequences
with many short ones: GROBID name-header's test file at batch 256 is one batch of 145
sequences from 1 to over 100 tokens. Such a batch is padded, and every stage (the BiLSTM, the
dense layer, the CRF, the character vectors placed per position) runs over the whole padded
block. Cutting it into a few groups of similar length, each run as its own batch, costs one
more network call per group and saves that padding.

Outputs are unchanged: every sequence is run on its own row, whatever else shares its call.
Measurements: docs/performance.md.

``batch_size`` keeps its meaning, the most sequences one network call takes: groups are
parts of a batch, never larger. Whether and at what costs a call's batches are cut is one of its
CPU routes (:func:`textorch.models.cpu_routes.decide`: CPU inference of models without a
transformer, where the costs were measured; a tagging transformer's windows are grouped by
:meth:`textorch.models.transformer.TransformerEmbedder.windows`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from textorch.data.batching import sorted_batches
from textorch.models.costs import GroupCosts
from textorch.models.length_groups import length_groups


def inference_batches(lengths: Sequence[int], batch_size: int, costs: GroupCosts | None) -> list[list[int]]:
    """Positions into ``lengths`` in batches of at most ``batch_size``, sorted by length; each
    batch cut where ``costs`` (the call's ``CpuRoutes.batch_groups``; None: never) says that pays."""
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

