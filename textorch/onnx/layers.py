"""Export-friendly equivalents of the layers that pack sequences.

The training networks pack sequences (``pack_padded_sequence``), which the ONNX exporter does
not translate. These modules compute the same thing on right-padded tensors instead: each
bidirectional RNN is split into its two directions, and the backward direction reads every
sequence reversed *within its own length* (a gather), so it never sees padding. They hold the
trained modules' own weights (shared or copied), never new ones.
"""

from __future__ import annotations

import torch
from torch import nn

from textorch.errors import ConfigError
from textorch.models.embedders import CharBiLSTMEmbedder, CharCNNEmbedder, FeatureEmbedder
from textorch.models.padded_rnn import gather_time, reverse_index


def _check_rnn(rnn: nn.RNNBase) -> None:
    if rnn.num_layers != 1 or not rnn.batch_first:
        raise ConfigError("ONNX export supports one-layer, batch-first RNNs only")


def _split_directions(rnn: nn.RNNBase) -> tuple[nn.RNNBase, nn.RNNBase]:
    """Two one-direction RNNs holding the weights of a one-layer bidirectional ``rnn``."""
    _check_rnn(rnn)
    if not rnn.bidirectional:
        raise ConfigError("ONNX export: expected a bidirectional RNN")
    directions = []
    for suffix in ("", "_reverse"):
        single = type(rnn)(rnn.input_size, rnn.hidden_size, batch_first=True)
        with torch.no_grad():
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(single, name).copy_(getattr(rnn, name + suffix))
        directions.append(single.eval())
    return directions[0], directions[1]


class PaddedBiRNN(nn.Module):
    """A bidirectional RNN on right-padded input, equal to the packed one on every real step."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.forward_rnn, self.backward_rnn = _split_directions(rnn)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Outputs (B, T, 2H); rows past a sequence's length hold values nobody should read."""
        index = reverse_index(lengths, x.shape[1])
        forward_out, _ = self.forward_rnn(x)
        backward_out, _ = self.backward_rnn(gather_time(x, index))
        return torch.cat([forward_out, gather_time(backward_out, index)], dim=-1)


class PaddedRNN(nn.Module):
    """Any one-layer batch-first RNN on right-padded input; zeros past each length, as
    ``pad_packed_sequence`` gives (a forward direction never reads what follows a step)."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        _check_rnn(rnn)
        self.bidirectional = PaddedBiRNN(rnn) if rnn.bidirectional else None
        self.rnn = None if rnn.bidirectional else rnn

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``mask`` (B, T) bool, a prefix of ones per row."""
        if self.bidirectional is not None:
            out = self.bidirectional(x, mask.sum(dim=1))
        else:
            out, _ = self.rnn(x)
        return out * mask.unsqueeze(-1).to(out.dtype)


def last_step(outputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, H) outputs at each row's last real step: the final state of a forward RNN."""
    last = (lengths - 1).clamp(min=0)
    return outputs[torch.arange(outputs.shape[0]), last]


class CharBiLSTM(nn.Module):
    """:class:`CharBiLSTMEmbedder` on ``char_ids`` (B, L, C): final states of both directions."""

    def __init__(self, embedder: CharBiLSTMEmbedder) -> None:
        super().__init__()
        self.embedding = embedder.embedding
        self.rnn = PaddedBiRNN(embedder.lstm)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        lengths = (flat != 0).sum(dim=1)
        out = self.rnn(self.embedding(flat), lengths)  # (N, C, 2H)
        half = out.shape[-1] // 2
        # Final states: the forward direction's at the last character; the backward
        # direction ends on the first character, so after un-reversing it sits at position 0.
        forward_final = last_step(out[..., :half], lengths)
        backward_final = out[:, 0, half:]
        present = (lengths > 0).unsqueeze(1).to(out.dtype)  # tokens without characters are zeros
        return (torch.cat([forward_final, backward_final], dim=-1) * present).reshape(b, l, -1)


class CharCNN(nn.Module):
    """:class:`CharCNNEmbedder` without infinities (a token without characters gives zeros)."""

    def __init__(self, embedder: CharCNNEmbedder) -> None:
        super().__init__()
        self.embedder = embedder

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        h = self.embedder.conv(self.embedder.embedding(flat).transpose(1, 2))
        empty = (flat == 0).unsqueeze(1)
        # A large negative instead of -inf: tokens without characters come out as zeros below.
        pooled = h.masked_fill(empty, -1e30).max(dim=2).values
        present = (~empty).any(dim=2).to(h.dtype)
        return (pooled * present).reshape(b, l, -1)


class Features(nn.Module):
    """:class:`FeatureEmbedder` on ``feature_ids`` (B, L, F) instead of a batch."""

    def __init__(self, embedder: FeatureEmbedder) -> None:
        super().__init__()
        self.embedder = embedder

    def forward(self, feature_ids: torch.Tensor) -> torch.Tensor:
        parts = [emb(feature_ids[..., i]) for i, emb in enumerate(self.embedder.embeddings)]
        return torch.tanh(self.embedder.projection(torch.cat(parts, dim=-1)))
