"""Output layers: token representations to a loss (training) and label ids (decoding)."""

from __future__ import annotations

import torch
from torch import nn

from textorch.models.crf import CRF


class CRFHead(nn.Module):
    """Linear emissions followed by a linear-chain CRF (all ``ChainCRF`` names map here too)."""

    def __init__(self, input_dim: int, n_labels: int) -> None:
        super().__init__()
        self.emissions = nn.Linear(input_dim, n_labels)
        self.crf = CRF(n_labels)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Per-sequence negative log-likelihood, shape (B,)."""
        return self.crf.neg_log_likelihood(self.emissions(h).float(), labels, mask)

    def decode(self, h: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Best label ids (B, L) and, per token, the posterior probability of that label."""
        return self.crf.best_paths_with_confidence(self.emissions(h).float(), mask)


class SoftmaxHead(nn.Module):
    """Independent per-token classification (the architectures without CRF)."""

    def __init__(self, input_dim: int, n_labels: int) -> None:
        super().__init__()
        self.emissions = nn.Linear(input_dim, n_labels)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        logits = self.emissions(h).float()
        token_loss = nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
        return (token_loss * mask).sum(dim=1)

    def decode(self, h: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        probabilities = self.emissions(h).float().softmax(dim=-1)
        scores, paths = probabilities.max(dim=-1)
        return paths * mask, scores * mask
