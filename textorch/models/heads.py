"""Output layers: token representations to a loss (training) and label ids (decoding)."""

from __future__ import annotations

import torch
from torch import nn

from textorch.models import cpu_decoder, cpu_routes
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
        CPU's one decoder (:func:`cpu_crf_paths`) where the call's routes take it
        (``CpuRoutes.crf_kernel``) and the tensors allow it (CPU, no gradients), else by the
        reference CRF."""
        emissions = emission_sum(self.emissions(h), extra)
        if cpu_routes.current().crf_kernel and emissions.device.type == "cpu" and not emissions.requires_grad:
            self.crf.check_shapes(emissions, mask)  # the decoder never reads padded positions
            return cpu_crf_paths(self.crf, emissions, mask.to(torch.int64).sum(dim=1), with_scores)
        return self.crf.best_paths_with_confidence(emissions, mask, with_scores)


def cpu_crf_paths(crf: CRF, emissions: torch.Tensor, lengths: torch.Tensor,
                  with_confidence: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``crf``'s :meth:`~textorch.models.crf.CRF.best_paths_with_confidence` by the CPU's one
    decoder (:func:`textorch.models.cpu_decoder.crf_paths`), for rows of ``lengths`` (>= 1, a CPU
    tensor): positions past a row's length are never read, so ``emissions`` may hold anything
    there (and be a strided view)."""
    if emissions.dim() != 3 or emissions.size(2) != crf.num_tags or lengths.shape != emissions.shape[:1]:
        raise ValueError(f"emissions must be (batch, length, {crf.num_tags}) with one length per row, got "
                         f"{tuple(emissions.shape)} and {tuple(lengths.shape)} lengths")
    paths, confidence = cpu_decoder.crf_paths(
        emissions.detach().float().numpy(), lengths.numpy(), crf.transitions.detach().numpy(),
        crf.start_transitions.detach().numpy(), crf.end_transitions.detach().numpy(), with_confidence,
    )
    return torch.from_numpy(paths), None if confidence is None else torch.from_numpy(confidence)


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
        """Each position's most probable label id (B, L) and its probability, 0 at padding: on the
        CPU without gradients by the CPU's one decoder
        (:func:`textorch.models.cpu_decoder.softmax_paths`, which the ONNX engines share), else
        by the tensors' own softmax. The probabilities cost nothing next to the argmax: returned
        either way."""
        emissions = emission_sum(self.emissions(h), extra)
        if emissions.device.type == "cpu" and not emissions.requires_grad:
            lengths = mask.to(torch.int64).sum(dim=1).numpy()
            paths, scores = cpu_decoder.softmax_paths(emissions.numpy(), lengths)
            return torch.from_numpy(paths), torch.from_numpy(scores)
        scores, paths = emissions.softmax(dim=-1).max(dim=-1)
        return paths * mask, scores * mask
