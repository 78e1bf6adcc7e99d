"""Token-level input representations; each maps a :class:`Batch` to ``(B, L, output_dim)``.

An architecture is a list of these, concatenated, so "word vectors + char CNN + casing" is a
configuration, not a class.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from textorch.data.batching import Batch


class WordVectorEmbedder(nn.Module):
    """Pre-trained, frozen vectors gathered by the data pipeline (see ``WordTable``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.output_dim = dim

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.word_vectors is None:
            raise ValueError("this model needs word vectors but the batch has none")
        return batch.word_vectors


class CharBiLSTMEmbedder(nn.Module):
    """Character BiLSTM per token; final states of both directions form the token vector."""

    def __init__(self, n_chars: int, char_dim: int = 25, hidden: int = 25) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim, hidden, batch_first=True, bidirectional=True)
        self.output_dim = 2 * hidden

    def forward(self, batch: Batch) -> torch.Tensor:
        char_ids = batch.char_ids  # (B, L, C)
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        char_lengths = (flat != 0).sum(dim=1)
        present = char_lengths > 0
        out = flat.new_zeros((b * l, self.output_dim), dtype=self.embedding.weight.dtype)
        if bool(present.any()):
            # Only real tokens go through the LSTM: padding tokens would be most of the work.
            tokens = flat[present]
            lengths = char_lengths[present].cpu()
            packed = pack_padded_sequence(self.embedding(tokens), lengths, batch_first=True, enforce_sorted=False)
            _, (h_n, _) = self.lstm(packed)  # h_n: (2, N, H)
            out[present] = torch.cat([h_n[0], h_n[1]], dim=-1).to(out.dtype)
        return out.reshape(b, l, self.output_dim)


class CharCNNEmbedder(nn.Module):
    """Character convolution with max pooling over the token (Ma and Hovy's char CNN)."""

    def __init__(self, n_chars: int, char_dim: int = 25, filters: int = 30, width: int = 3) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, kernel_size=width, padding=width // 2)
        self.output_dim = filters

    def forward(self, batch: Batch) -> torch.Tensor:
        char_ids = batch.char_ids
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        x = self.embedding(flat).transpose(1, 2)  # (N, E, C)
        h = self.conv(x)  # (N, F, C)
        h = h.masked_fill((flat == 0).unsqueeze(1), float("-inf"))
        pooled = h.max(dim=2).values
        pooled = torch.where(torch.isinf(pooled), torch.zeros_like(pooled), pooled)
        return pooled.reshape(b, l, self.output_dim)


class CasingEmbedder(nn.Module):
    """Learned embedding of the coarse token shape (``encoding.casing_class``)."""

    def __init__(self, n_classes: int, dim: int = 8) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_classes, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.embedding(batch.casing_ids)


class FeatureEmbedder(nn.Module):
    """One small embedding per categorical feature column, concatenated then projected."""

    def __init__(self, vocab_sizes: list[int], dim: int = 4, output_dim: int = 32) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(size, dim, padding_idx=0) for size in vocab_sizes)
        self.projection = nn.Linear(dim * len(vocab_sizes), output_dim)
        self.output_dim = output_dim

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.feature_ids is None:
            raise ValueError("this model needs feature columns but the batch has none")
        parts = [emb(batch.feature_ids[..., i]) for i, emb in enumerate(self.embeddings)]
        return torch.tanh(self.projection(torch.cat(parts, dim=-1)))


def run_packed_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Run an RNN over right-padded sequences so padding never leaks into the backward pass."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = rnn(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out
