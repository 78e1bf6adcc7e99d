"""The sequence-labelling model: embedders -> dropout -> encoder -> dropout -> head."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from textorch.data.batching import Batch


@dataclass
class TaggerOutput:
    loss: torch.Tensor | None  # (B,) per-sequence loss, when labels are present
    hidden: torch.Tensor  # (B, L, H)


class SequenceTagger(nn.Module):
    """The one model class of every non-transformer architecture; parts are passed in."""

    def __init__(self, embedders: nn.ModuleList, encoder: nn.Module, head: nn.Module, dropout: float,
                 template_emissions: nn.Module | None = None) -> None:
        super().__init__()
        self.embedders = embedders
        self.encoder = encoder
        self.head = head
        self.template_emissions = template_emissions
        """Label scores from CRF-template features, added to the head's emissions (or None)."""
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = nn.Dropout(dropout)

    def encode(self, batch: Batch) -> torch.Tensor:
        h = self.encoder(self.dropout(self.embed(batch)), batch.mask, batch.lengths)
        return self.dropout(h)

    def embed(self, batch: Batch) -> torch.Tensor:
        return torch.cat([embedder(batch) for embedder in self.embedders], dim=-1)

    def forward(self, batch: Batch) -> TaggerOutput:
        hidden = self.encode(batch)
        loss = None
        if batch.label_ids is not None:
            loss = self.head.loss(hidden, batch.label_ids, batch.mask, self.extra_emissions(batch))
        return TaggerOutput(loss=loss, hidden=hidden)

    def decode(self, batch: Batch, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Label ids (B, L) and per-token confidence (B, L), or None for it when not asked for."""
        return self.head.decode(self.encode(batch), batch.mask, with_scores, self.extra_emissions(batch))

    def train_template_features_alone(self) -> None:
        """Make this network GROBID's CRF: the emission layer reads nothing (zero and frozen), every
        part but the template table and the CRF is frozen (no step is spent on it), and no template
        feature is dropped. Saved and served as any other model: the emissions it adds are zero."""
        if self.template_emissions is None:
            raise ValueError("training the template features alone needs a *_TEMPLATE architecture")
        with torch.no_grad():
            for weight in self.head.emissions.parameters():
                weight.zero_()
        kept = {id(p) for p in self.template_emissions.parameters()}
        kept |= {id(p) for p in getattr(self.head, "crf", nn.Module()).parameters()}
        for weight in self.parameters():
            weight.requires_grad_(id(weight) in kept)
        self.template_emissions.dropout = 0.0

    def extra_emissions(self, batch: Batch) -> torch.Tensor | None:
        """The template features' label scores, or None for a model without them."""
        if self.template_emissions is None:
            return None
        if batch.template_rows is None:
            raise ValueError("this model needs CRF-template features but the batch has none")
        return self.template_emissions(batch.template_rows)
