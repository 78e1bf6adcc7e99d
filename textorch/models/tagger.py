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


class FastDropout(nn.Module):
    """Inverted dropout with a cheaper mask than ``nn.Dropout`` on the CPU.

    ``nn.Dropout`` draws its mask with ``bernoulli_``, which took 1.8 ms for a (32, 30, 150)
    batch here against 0.4 ms for random bits (p = 0.5) or 0.6 ms for a uniform draw: about 10 %
    of a BiLSTM-CRF training step. Same expectation and scaling; identity in eval mode.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 0.5:
            keep = torch.randint(0, 2, x.shape, dtype=torch.uint8, device=x.device)
        else:
            keep = torch.rand(x.shape, device=x.device) >= self.p
        return x * keep.to(x.dtype) * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class SequenceTagger(nn.Module):
    """The one model class of every non-transformer architecture; parts are passed in."""

    def __init__(self, embedders: nn.ModuleList, encoder: nn.Module, head: nn.Module, dropout: float) -> None:
        super().__init__()
        self.embedders = embedders
        self.encoder = encoder
        self.head = head
        self.dropout = FastDropout(dropout)

    def encode(self, batch: Batch) -> torch.Tensor:
        x = torch.cat([embedder(batch) for embedder in self.embedders], dim=-1)
        h = self.encoder(self.dropout(x), batch.mask, batch.lengths)
        return self.dropout(h)

    def forward(self, batch: Batch) -> TaggerOutput:
        hidden = self.encode(batch)
        loss = None
        if batch.label_ids is not None:
            loss = self.head.loss(hidden, batch.label_ids, batch.mask)
        return TaggerOutput(loss=loss, hidden=hidden)

    def decode(self, batch: Batch, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Label ids (B, L) and per-token confidence (B, L), or None for it when not asked for."""
        return self.head.decode(self.encode(batch), batch.mask, with_scores)
