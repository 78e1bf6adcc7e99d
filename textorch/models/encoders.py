"""Word-level context encoders: ``(B, L, in_dim) -> (B, L, output_dim)``."""

from __future__ import annotations

import torch
from torch import nn

from textorch.models.padded_rnn import rnn_outputs


class RecurrentEncoder(nn.Module):
    """Bidirectional LSTM or GRU over the token sequence, padding never enters a state
    (:func:`textorch.models.padded_rnn.rnn_outputs`)."""

    def __init__(self, input_dim: int, hidden: int = 100, cell: str = "lstm", layers: int = 1) -> None:
        super().__init__()
        rnn_class = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn_class(input_dim, hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.output_dim = 2 * hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return rnn_outputs(self.rnn, x, lengths)


class IdentityEncoder(nn.Module):
    """For inputs that are already contextual (transformer outputs)."""

    def __init__(self, input_dim: int) -> None:
        super().__init__()
        self.output_dim = input_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return x
