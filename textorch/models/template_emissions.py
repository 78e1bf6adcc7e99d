"""The CRF's own features inside a network: one learned weight per (template feature, label).

:class:`TemplateEmissions` turns the rows :class:`textorch.data.template_features.TemplateFeaturizer`
gives each token into label scores, the sum of its features' weights, which the tagger adds to
the recurrent encoder's emissions. Trained jointly, the sum holds what a linear-chain CRF over
GROBID's templates holds (the rare exact values a feature column carries, which small data
cannot teach an LSTM) and what the network adds. Weights start at zero: at first the model is
its recurrent part alone.

The fitted key table rides along as a buffer, so that the weights and the table that says which
row is which feature are one file, written and read together.
"""

from __future__ import annotations

import torch
from torch import nn


class TemplateEmissions(nn.Module):
    """``(B, L, K)`` table rows -> ``(B, L, labels)`` summed weights (row 0 weighs nothing)."""

    rate_option = "template_learning_rate"
    """The training option that holds this table's own learning rate (see
    :func:`textorch.train.trainer.parameter_groups`): Adam moves every weight about one rate a
    step whatever its gradient's size, so at the rate the recurrent layers train with, hundreds of
    thousands of feature weights whose gradients have faded to noise keep drifting, and a long
    run on whole documents loses what it had learnt (docs/performance.md, "GROBID's big models")."""

    l1_option = "template_l1"
    """The training option that holds this table's L1 penalty (see
    :func:`textorch.train.trainer.l1_penalties`): a CRF's sparse choice of features, where a dense
    table lets many weak clues outvote the few that hold."""

    def __init__(self, n_rows: int, n_labels: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = dropout
        """Share of a token's features left out of each training step, so that the recurrent
        part keeps learning instead of leaving the training data to weights that memorise it."""
        self.weight = nn.Parameter(torch.zeros(n_rows, n_labels))
        self.register_buffer("keys", torch.zeros(max(n_rows - 1, 0), dtype=torch.int64))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        b, l, k = rows.shape
        if self.training:
            return self._training_sum(rows).reshape(b, l, -1)
        # embedding_bag sums each token's K rows without materialising (B, L, K, labels). Row 0
        # is zero (training never moves it), so outside training the sum reads it as it is.
        return nn.functional.embedding_bag(rows.reshape(b * l, k), self.weight, mode="sum").reshape(b, l, -1)

    def _training_sum(self, rows: torch.Tensor) -> torch.Tensor:
        """Each token's sum over its rows other than row 0 (padding, absent and dropped features),
        so row 0 gets no gradient and stays zero. The rows kept are handed over as one flat list
        with each token's offset rather than with ``padding_idx=0``, for which embedding_bag takes
        a much slower kernel; its backward then sorts only the rows that count."""
        flat = rows.reshape(-1, rows.shape[-1])
        keep = flat != 0
        if self.dropout > 0:
            keep &= torch.rand(flat.shape, device=flat.device) >= self.dropout
        counts = keep.sum(dim=1)
        offsets = torch.cumsum(counts, dim=0) - counts
        return nn.functional.embedding_bag(flat[keep], self.weight, offsets, mode="sum")

    def set_keys(self, keys: torch.Tensor) -> None:
        """Store the featurizer's fitted table (uint64 keys, viewed as int64 for safetensors)."""
        self.keys.copy_(keys)
