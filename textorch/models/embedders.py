"""Token-level input representations; each maps a :class:`Batch` to ``(B, L, output_dim)``.

An architecture is a list of these, concatenated, so "word vectors + char CNN + casing" is a
configuration, not a class. Besides ``forward``, each embedder knows its own forms for the two
other routes a tagger runs (:class:`Embedder`): the ONNX export and the one-sequence call, so no
other module re-implements the stack by asking each embedder's type.
"""

from __future__ import annotations

import torch
from torch import nn
from textorch.data.batching import Batch
from textorch.data.encoding import EncodedSequence
from textorch.data.word_table import WordTable
from textorch.errors import ConfigError
from textorch.models import export_layers
from textorch.models.padded_rnn import rnn_final_states, rnn_outputs
from textorch.models.rows import inverse_permutation, select_rows


class Embedder(nn.Module):
    """What every embedder offers beyond ``forward``; the defaults say "this route is not served".

    * ``graph_inputs`` and :meth:`export_form`: the ONNX graph inputs it reads and an
      export-friendly module computing its output from them (``onnx/export.py`` stacks these);
    * ``serves_one_sequence`` and :meth:`one_sequence_vectors`: its ``(T, output_dim)`` output for
      one encoded sequence, straight from the encoded ids (:mod:`textorch.models.one_sequence`);
      ``reads_token_vectors``: that output is read from the call's character-encoder vectors.
    """

    graph_inputs: tuple[str, ...] = ()
    serves_one_sequence = False
    reads_token_vectors = False

    def export_form(self) -> nn.Module:
        raise ConfigError(f"ONNX export does not know the embedder {type(self).__name__}")

    def one_sequence_vectors(self, item: EncodedSequence, word_table: WordTable | None,
                             token_vectors: torch.Tensor | None) -> torch.Tensor | None:
        """``(T, output_dim)`` for ``item``, or None where a part the call needs is missing
        (the batch route then runs, and reports it)."""
        return None


class TokenVectorReader(Embedder):
    """A character encoder's one-sequence form: its rows of the call's token-type vectors."""

    serves_one_sequence = True
    reads_token_vectors = True

    def one_sequence_vectors(self, item: EncodedSequence, word_table: WordTable | None,
                             token_vectors: torch.Tensor | None) -> torch.Tensor | None:
        if token_vectors is None:
            return None
        return token_vectors.index_select(0, torch.from_numpy(item.type_ids))


class WordVectorEmbedder(Embedder):
    """Pre-trained, frozen vectors gathered by the data pipeline (see ``WordTable``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.output_dim = dim

    graph_inputs = ("word_vectors",)
    serves_one_sequence = True

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.word_vectors is None:
            raise ValueError("this model needs word vectors but the batch has none")
        return batch.word_vectors

    def export_form(self) -> nn.Module:
        return nn.Identity()

    def one_sequence_vectors(self, item: EncodedSequence, word_table: WordTable | None,
                             token_vectors: torch.Tensor | None) -> torch.Tensor | None:
        if item.word_ids is None or word_table is None:
            return None
        return torch.from_numpy(word_table.matrix[item.word_ids])


class CharBiLSTMEmbedder(TokenVectorReader):
    """Character BiLSTM per token; final states of both directions form the token vector."""

    def __init__(self, n_chars: int, char_dim: int = 25, hidden: int = 25) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim, hidden, batch_first=True, bidirectional=True)
        self.output_dim = 2 * hidden

    graph_inputs = ("char_ids",)

    def export_form(self) -> nn.Module:
        return export_layers.CharBiLSTM(self)

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


class CharCNNEmbedder(TokenVectorReader):
    """Character convolution with max pooling over the token (Ma and Hovy's char CNN).

    ``padded_to`` > 0 reproduces DeLFT 1.x's variant, which imported models need: each token is
    padded to that many characters, the convolution output goes through a tanh, and the max
    runs over every position, padding included."""

    def __init__(self, n_chars: int, char_dim: int = 25, filters: int = 30, width: int = 3, padded_to: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, kernel_size=width, padding=width // 2)
        self.output_dim = filters
        self.padded_to = padded_to

    graph_inputs = ("char_ids",)

    def export_form(self) -> nn.Module:
        if self.padded_to:  # the graph's width follows the batch: DeLFT's pooling would change with it
            raise ConfigError("ONNX export does not support DeLFT's character CNN (char_cnn_pooling 'padded')")
        return export_layers.CharCNN(self)

    def forward(self, batch: Batch) -> torch.Tensor:
        return per_token(self.encode_rows, batch)

    def encode_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """``(N, C)`` character ids -> ``(N, filters)``; all-padding rows give zeros."""
        if self.padded_to:
            return self._padded_rows(rows)
        x = self.embedding(rows).transpose(1, 2)  # (N, E, C)
        h = self.conv(x)  # (N, F, C)
        h = h.masked_fill((rows == 0).unsqueeze(1), float("-inf"))
        pooled = h.max(dim=2).values
        return torch.where(torch.isinf(pooled), torch.zeros_like(pooled), pooled)

    def _padded_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """DeLFT 1.x's pooling: the padding positions up to ``padded_to`` take part in the max."""
        present = (rows != 0).any(dim=1, keepdim=True)
        if rows.shape[1] < self.padded_to:
            rows = nn.functional.pad(rows, (0, self.padded_to - rows.shape[1]))
        pooled = torch.tanh(self.conv(self.embedding(rows).transpose(1, 2))).max(dim=2).values
        return pooled * present.to(pooled.dtype)


class CasingEmbedder(Embedder):
    """Learned embedding of the coarse token shape (``encoding.casing_class``)."""

    def __init__(self, n_classes: int, dim: int = 8) -> None:
        super().__init__()
        self.embedding = nn.Embedding(n_classes, dim, padding_idx=0)
        self.output_dim = dim

    graph_inputs = ("casing_ids",)
    serves_one_sequence = True

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.embedding(batch.casing_ids)

    def export_form(self) -> nn.Module:
        return self.embedding

    def one_sequence_vectors(self, item: EncodedSequence, word_table: WordTable | None,
                             token_vectors: torch.Tensor | None) -> torch.Tensor | None:
        return self.embedding(torch.from_numpy(item.casing_ids))


class FeatureEmbedder(Embedder):
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

    graph_inputs = ("feature_ids",)
    serves_one_sequence = True

    def embed(self, feature_ids: torch.Tensor) -> torch.Tensor:
        """``(B, L, F)`` feature ids -> ``(B, L, output_dim)`` (the ONNX export calls this too)."""
        parts = [emb(feature_ids[..., i]) for i, emb in enumerate(self.embeddings)]
        return torch.tanh(self.projection(torch.cat(parts, dim=-1)))

    def export_form(self) -> nn.Module:
        return export_layers.Features(self)

    def one_sequence_vectors(self, item: EncodedSequence, word_table: WordTable | None,
                             token_vectors: torch.Tensor | None) -> torch.Tensor | None:
        if item.feature_ids is None:
            return None
        return self.embed(torch.from_numpy(item.feature_ids[None]))[0]


class FeatureLSTMEmbedder(Embedder):
    """DeLFT 1.x's feature channel: each column's value embedded, then a BiLSTM reads the
    columns of a token in order; the final states of both directions form the token vector."""

    def __init__(self, vocab_sizes: list[int], dim: int = 4, output_dim: int = 32) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(size, dim, padding_idx=0) for size in vocab_sizes)
        self.lstm = nn.LSTM(dim, output_dim // 2, batch_first=True, bidirectional=True)
        self.output_dim = output_dim

    def forward(self, batch: Batch) -> torch.Tensor:
        if batch.feature_ids is None:
            raise ValueError("this model needs feature columns but the batch has none")
        ids = batch.feature_ids
        columns = torch.stack([emb(ids[..., i]) for i, emb in enumerate(self.embeddings)], dim=-2)
        b, l, f, d = columns.shape
        _, (final, _) = self.lstm(columns.reshape(b * l, f, d))
        return torch.cat([final[0], final[1]], dim=-1).reshape(b, l, self.output_dim)

    graph_inputs = ("feature_ids",)

    def export_form(self) -> nn.Module:
        return export_layers.FeatureLSTM(self)


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
