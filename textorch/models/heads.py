"""Output layers: token representations to a loss (training) and label ids (decoding)."""

from __future__ import annotations

import torch
from torch import nn

from textorch.models.crf import CRF


def emission_layer(input_dim: int, n_labels: int, dense_hidden: int = 0) -> nn.Module:
    """Token vectors to label scores: one linear layer, or (``dense_hidden > 0``) a tanh layer
    first, as in DeLFT's BiLSTM family. The one-layer form keeps the parameter names of models
    saved before the dense layer existed."""
    if dense_hidden <= 0:
        return nn.Linear(input_dim, n_labels)
    return nn.Sequential(nn.Linear(input_dim, dense_hidden), nn.Tanh(), nn.Linear(dense_hidden, n_labels))


class CRFHead(nn.Module):
    """Emissions followed by a linear-chain CRF (all ``ChainCRF`` names map here too)."""

    def __init__(self, input_dim: int, n_labels: int, dense_hidden: int = 0) -> None:
        super().__init__()
        self.emissions = emission_layer(input_dim, n_labels, dense_hidden)
        self.crf = CRF(n_labels)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-sequence negative log-likelihood, shape (B,)."""
        return self.crf.neg_log_likelihood(self.emissions(h).float(), labels, mask)

    def decode(self, h: torch.Tensor, mask: torch.Tensor, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Best label ids (B, L) and, per token, the posterior probability of that label."""
        return self.crf.best_paths_with_confidence(self.emissions(h).float(), mask, with_scores)


class SoftmaxHead(nn.Module):
    """Independent per-token classification (the architectures without CRF)."""

    def __init__(self, input_dim: int, n_labels: int, dense_hidden: int = 0) -> None:
        super().__init__()
        self.emissions = emission_layer(input_dim, n_labels, dense_hidden)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logits = self.emissions(h).float()
        token_loss = nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
        return (token_loss * mask).sum(dim=1)

    def decode(self, h: torch.Tensor, mask: torch.Tensor, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        # The probabilities cost nothing next to the argmax: returned either way.
        probabilities = self.emissions(h).float().softmax(dim=-1)
        scores, paths = probabilities.max(dim=-1)
        return paths * mask, scores * mask
