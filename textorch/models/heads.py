"""Output layers: token representations to a loss (training) and label ids (decoding)."""

from __future__ import annotations

import torch
from torch import nn

from textorch.models import cpu_routes, crf_compiled
from textorch.models.crf import CRF


def emission_layer(input_dim: int, n_labels: int, dense_hidden: int = 0) -> nn.Module:
    """Token vectors to label scores: one linear layer, or (``dense_hidden > 0``) a tanh layer
    first, as in DeLFT's BiLSTM family. The one-layer form keeps the parameter names of models
    saved before the dense layer existed."""
    if dense_hidden <= 0:
        return nn.Linear(input_dim, n_labels)
    return nn.Sequential(nn.Linear(input_dim, dense_hidden), nn.Tanh(), nn.Linear(dense_hidden, n_labels))


def emission_sum(emissions: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
    """Float32 emissions plus ``extra`` label scores where the model has them."""
    emissions = emissions.float()
    return emissions if extra is None else emissions + extra.float()


class CRFHead(nn.Module):
    """Emissions followed by a linear-chain CRF (all ``ChainCRF`` names map here too)."""

    def __init__(self, input_dim: int, n_labels: int, dense_hidden: int = 0) -> None:
        super().__init__()
        self.emissions = emission_layer(input_dim, n_labels, dense_hidden)
        self.crf = CRF(n_labels)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
             extra: torch.Tensor | None = None) -> torch.Tensor:
        """Per-sequence negative log-likelihood, shape (B,); ``extra``: label scores added to
        the emissions (CRF-template features)."""
        return self.crf.neg_log_likelihood(emission_sum(self.emissions(h), extra), labels, mask)

    def decode(self, h: torch.Tensor, mask: torch.Tensor, with_scores: bool = True,
               extra: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Best label ids (B, L) and, per token, the posterior probability of that label: by the
        compiled kernel where the call's routes take it (``CpuRoutes.crf_kernel``) and it serves
        the tensors (CPU, no gradients), else by the reference CRF."""
        emissions = emission_sum(self.emissions(h), extra)
        if cpu_routes.current().crf_kernel and emissions.device.type == "cpu" and not emissions.requires_grad:
            self.crf.check_shapes(emissions, mask)  # the kernel never reads padded positions
            return crf_compiled.best_paths(self.crf, emissions, mask.to(torch.int64).sum(dim=1), with_scores)
        return self.crf.best_paths_with_confidence(emissions, mask, with_scores)


class SoftmaxHead(nn.Module):
    """Independent per-token classification (the architectures without CRF)."""

    def __init__(self, input_dim: int, n_labels: int, dense_hidden: int = 0) -> None:
        super().__init__()
        self.emissions = emission_layer(input_dim, n_labels, dense_hidden)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor,
             extra: torch.Tensor | None = None) -> torch.Tensor:
        logits = emission_sum(self.emissions(h), extra)
        token_loss = nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
        return (token_loss * mask).sum(dim=1)

    def decode(self, h: torch.Tensor, mask: torch.Tensor, with_scores: bool = True,
               extra: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        # The probabilities cost nothing next to the argmax: returned either way.
        probabilities = emission_sum(self.emissions(h), extra).softmax(dim=-1)
        scores, paths = probabilities.max(dim=-1)
        return paths * mask, scores * mask
