"""Export-friendly equivalents of the layers that pack sequences (each embedder's ``export_form``).

The networks' recurrent layers choose their route from each batch's device and lengths, packing
on CUDA (``pack_padded_sequence``, see :func:`textorch.models.padded_rnn.rnn_outputs`): a traced
graph cannot follow that choice, and the ONNX exporter does not translate packed sequences. These
modules compute the same thing on right-padded tensors instead: each
bidirectional RNN is split into its two directions, and the backward direction reads every
sequence reversed *within its own length* (a gather), so it never sees padding. They hold the
trained modules' own weights (shared or copied), never new ones.

In the exported graph a bidirectional RNN is one native ONNX ``LSTM``/``GRU`` node with
``sequence_lens`` (it reverses each sequence within its length itself), not the traced
two-direction version: the traced one added about a hundred shape and gather nodes, which
made one-sequence calls markedly slower for the same outputs (docs/performance.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from textorch.errors import ConfigError

if TYPE_CHECKING:
    from textorch.models.embedders import CharBiLSTMEmbedder, CharCNNEmbedder, FeatureEmbedder, FeatureLSTMEmbedder
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


# Gate order of each ONNX operator's weights, as indices of PyTorch's gate blocks:
# PyTorch LSTM (i, f, g, o) -> ONNX (i, o, f, c); PyTorch GRU (r, z, n) -> ONNX (z, r, h).
_ONNX_GATES = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2)}


def _onnx_kind(rnn: nn.RNNBase) -> str:
    if isinstance(rnn, nn.LSTM):
        return "LSTM"
    if isinstance(rnn, nn.GRU):
        return "GRU"
    raise ConfigError(f"ONNX export supports LSTM and GRU layers, not {type(rnn).__name__}")


def _onnx_weights(rnn: nn.RNNBase) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W (2, G*H, I), R (2, G*H, H) and B (2, 2*G*H) of a one-layer bidirectional ``rnn``, in the
    gate order of the ONNX operator (biases: input then recurrent, as the operator wants)."""
    order = _ONNX_GATES[_onnx_kind(rnn)]
    size = rnn.hidden_size

    def reordered(name: str) -> torch.Tensor:
        value = getattr(rnn, name).detach()
        return torch.cat([value[g * size:(g + 1) * size] for g in order], dim=0)

    weights, recurrent, biases = [], [], []
    for suffix in ("", "_reverse"):
        weights.append(reordered("weight_ih_l0" + suffix))
        recurrent.append(reordered("weight_hh_l0" + suffix))
        if rnn.bias:
            biases.append(torch.cat([reordered("bias_ih_l0" + suffix), reordered("bias_hh_l0" + suffix)]))
        else:
            biases.append(weights[-1].new_zeros(2 * len(order) * size))
    return torch.stack(weights), torch.stack(recurrent), torch.stack(biases)


@torch.library.custom_op("textorch::native_birnn", mutates_args=())
def native_birnn(x: torch.Tensor, lengths: torch.Tensor, weights: torch.Tensor, recurrent: torch.Tensor,
                 biases: torch.Tensor, kind: str, hidden: int, final: bool) -> torch.Tensor:
    """One bidirectional ``LSTM``/``GRU`` over right-padded ``x`` (B, T, I) with per-row
    ``lengths``, weights in the ONNX operator's layout (:func:`_onnx_weights`): (B, T, 2H)
    outputs, or with ``final`` the (B, 2H) final states.

    An operator of its own so that an exporter keeps it as one node, which
    :mod:`textorch.onnx.exporter` writes as the native ONNX node. It is only ever called while
    exporting (the modules compute the same thing with their own layers otherwise): its values
    are zeros of the right shape, all the TorchScript exporter's trace needs (``torch.export``
    asks :func:`_native_birnn_shape` instead)."""
    return _native_birnn_shape(x, lengths, weights, recurrent, biases, kind, hidden, final).zero_()


@native_birnn.register_fake
def _native_birnn_shape(x: torch.Tensor, lengths: torch.Tensor, weights: torch.Tensor, recurrent: torch.Tensor,
                        biases: torch.Tensor, kind: str, hidden: int, final: bool) -> torch.Tensor:
    """The output's shape and dtype, all an export needs to know of the operator."""
    if final:
        return x.new_empty(x.shape[0], 2 * hidden)
    return x.new_empty(x.shape[0], x.shape[1], 2 * hidden)


class PaddedBiRNN(nn.Module):
    """A bidirectional RNN on right-padded input, equal to the packed one on every real step."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.forward_rnn, self.backward_rnn = _split_directions(rnn)
        self.kind = _onnx_kind(rnn)
        weights, recurrent, biases = _onnx_weights(rnn)
        self.register_buffer("onnx_weights", weights, persistent=False)
        self.register_buffer("onnx_recurrent", recurrent, persistent=False)
        self.register_buffer("onnx_biases", biases, persistent=False)

    def _native(self, x: torch.Tensor, lengths: torch.Tensor, final: bool) -> torch.Tensor:
        # A length of 0 (an all-padding row) is not valid for the operator: such rows run one
        # step and are zeroed by the caller.
        return native_birnn(x, lengths.clamp(min=1), self.onnx_weights, self.onnx_recurrent,
                            self.onnx_biases, self.kind, self.forward_rnn.hidden_size, final)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Outputs (B, T, 2H); rows past a sequence's length hold values nobody should read."""
        if torch.onnx.is_in_onnx_export():
            return self._native(x, lengths, final=False)
        index = reverse_index(lengths, x.shape[1])
        forward_out, _ = self.forward_rnn(x)
        backward_out, _ = self.backward_rnn(gather_time(x, index))
        return torch.cat([forward_out, gather_time(backward_out, index)], dim=-1)

    def final_states(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, 2H): the forward direction's state at the last real step, then the backward
        direction's after reading back to the first (``h_n`` of the packed RNN); lengths >= 1."""
        if torch.onnx.is_in_onnx_export():
            return self._native(x, lengths, final=True)
        out = self.forward(x, lengths)
        half = out.shape[-1] // 2
        return torch.cat([last_step(out[..., :half], lengths), out[:, 0, half:]], dim=-1)


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

    def __init__(self, embedder: "CharBiLSTMEmbedder") -> None:
        super().__init__()
        self.embedding = embedder.embedding
        self.rnn = PaddedBiRNN(embedder.lstm)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        lengths = (flat != 0).sum(dim=1)
        final = self.rnn.final_states(self.embedding(flat), lengths.clamp(min=1))
        present = (lengths > 0).unsqueeze(1).to(final.dtype)  # tokens without characters are zeros
        return (final * present).reshape(b, l, -1)


class CharCNN(nn.Module):
    """:class:`CharCNNEmbedder` without infinities (a token without characters gives zeros)."""

    def __init__(self, embedder: "CharCNNEmbedder") -> None:
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

    def __init__(self, embedder: "FeatureEmbedder") -> None:
        super().__init__()
        self.embedder = embedder

    def forward(self, feature_ids: torch.Tensor) -> torch.Tensor:
        return self.embedder.embed(feature_ids)


class FeatureLSTM(nn.Module):
    """:class:`FeatureLSTMEmbedder` on ``feature_ids`` (B, L, F): each column's value embedded, then
    the final states of one BiLSTM reading the F columns of each token (every column is real)."""

    def __init__(self, embedder: "FeatureLSTMEmbedder") -> None:
        super().__init__()
        self.embeddings = embedder.embeddings
        self.rnn = PaddedBiRNN(embedder.lstm)

    def forward(self, feature_ids: torch.Tensor) -> torch.Tensor:
        columns = torch.stack([emb(feature_ids[..., i]) for i, emb in enumerate(self.embeddings)], dim=-2)
        b, l, f, d = columns.shape
        flat = columns.reshape(b * l, f, d)
        lengths = torch.ones_like(flat[:, 0, 0], dtype=torch.long) * f
        return self.rnn.final_states(flat, lengths).reshape(b, l, -1)
