"""Token-level input representations; each maps a :class:`Batch` to ``(B, L, output_dim)``.

An architecture is a list of these, concatenated, so "word vectors + char CNN + casing" is a
configuration, not a class.
"""

from __future__ import annotations

import torch
from torch import nn
from textorch.data.batching import Batch
from textorch.models.padded_rnn import rnn_final_states, rnn_outputs
from textorch.models.rows import inverse_permutation, select_rows


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
        return per_token(self.encode_rows, batch)

    def encode_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """``(N, C)`` character ids -> ``(N, output_dim)``; all-padding rows give zeros."""
        char_lengths = (rows != 0).sum(dim=1)
        present = char_lengths > 0
        if rows.shape[0] and bool(present.all()):  # the usual case: nothing to mask or scatter back
            return self._final_states(rows, char_lengths)
        out = rows.new_zeros((rows.shape[0], self.output_dim), dtype=self.embedding.weight.dtype)
        if bool(present.any()):
            # Only real tokens go through the LSTM: padding tokens would be most of the work.
            out[present] = self._final_states(rows[present], char_lengths[present])
        return out

    def _final_states(self, rows: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Final BiLSTM states of rows that all have characters (``lengths`` >= 1)."""
        tokens = self.embedding(rows[:, : int(lengths.max())])
        return rnn_final_states(self.lstm, tokens, lengths).to(self.embedding.weight.dtype)


def per_token(encode_rows, batch: Batch) -> torch.Tensor:
    """Run a character encoder once per distinct token of the batch when the batch lists them
    (``char_rows``), else once per position; ``(B, L, output_dim)`` either way."""
    if batch.char_index is not None and batch.char_vectors is not None:
        return select_rows(batch.char_vectors, batch.char_index)  # padding points at a row of zeros
    if batch.char_index is not None and batch.char_rows is not None:
        index = batch.char_index
        return select_rows(encode_rows(batch.char_rows), index.clamp(min=0)).masked_fill((index < 0).unsqueeze(-1), 0.0)
    b, l, c = batch.char_ids.shape
    return encode_rows(batch.char_ids.reshape(b * l, c)).reshape(b, l, -1)


class CharCNNEmbedder(nn.Module):
    """Character convolution with max pooling over the token (Ma and Hovy's char CNN)."""

    def __init__(self, n_chars: int, char_dim: int = 25, filters: int = 30, width: int = 3) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, kernel_size=width, padding=width // 2)
        self.output_dim = filters

    def forward(self, batch: Batch) -> torch.Tensor:
        return per_token(self.encode_rows, batch)

    def encode_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """``(N, C)`` character ids -> ``(N, filters)``; all-padding rows give zeros."""
        x = self.embedding(rows).transpose(1, 2)  # (N, E, C)
        h = self.conv(x)  # (N, F, C)
        h = h.masked_fill((rows == 0).unsqueeze(1), float("-inf"))
        pooled = h.max(dim=2).values
        return torch.where(torch.isinf(pooled), torch.zeros_like(pooled), pooled)


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
        return self.embed(batch.feature_ids)

    def embed(self, feature_ids: torch.Tensor) -> torch.Tensor:
        """``(B, L, F)`` feature ids -> ``(B, L, output_dim)`` (the ONNX export calls this too)."""
        parts = [emb(feature_ids[..., i]) for i, emb in enumerate(self.embeddings)]
        return torch.tanh(self.projection(torch.cat(parts, dim=-1)))


run_packed_rnn = rnn_outputs
"""The former name of :func:`textorch.models.padded_rnn.rnn_outputs` (which packs only where that
pays), kept for old imports."""


def rows_encoder(model: nn.Module) -> nn.Module | None:
    """The model's character encoder (the one module with ``encode_rows``), if it has one."""
    found = [m for m in model.modules() if hasattr(m, "encode_rows")]
    return found[0] if len(found) == 1 else None


def encode_token_types(encoder: nn.Module, table: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Character vectors of a whole table of token types, in a few large calls.

    Tagging computes each distinct token once per call instead of once per batch: a whole test
    set's tokens repeat, so a few LSTM calls over the distinct types replace one call per batch
    over every token (the per-call, per-time-step overhead dominated the character LSTM there).
    Types are sorted by length before they are cut into chunks, so that each chunk pads its
    rows to similar lengths.
    """
    if table.shape[0] <= chunk:
        return encoder.encode_rows(table)
    order = torch.argsort((table != 0).sum(dim=1), stable=True)
    by_length = table.index_select(0, order)
    vectors = torch.cat([encoder.encode_rows(by_length[start : start + chunk])
                         for start in range(0, table.shape[0], chunk)])
    return vectors.index_select(0, inverse_permutation(order))
