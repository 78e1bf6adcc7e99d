"""Text classification networks under DeLFT's architecture names, composed from a few layers.

An architecture is data: a list of sequence layers (recurrent, convolution, pooling, dropout),
a pooling to one vector per text, and a dense head. ``gru`` is "BiGRU, dropout, BiGRU, max+mean
pooling, dense"; no class per architecture. Saved models name a versioned builder
(``text_classifier.v1``, ``transformer_classifier.v1``) so later releases keep loading them.

Every layer respects padding (RNNs never read it, convolutions see zeroed inputs, pooling is
masked), so a text's scores do not depend on which other texts share its batch: predictions are
the same whatever the batch size or the process that computes them.

Differences from DeLFT's Keras models, on purpose: no recurrent (state) dropout, which cuDNN
cannot run (dropout is applied between layers instead); "same" padding for every convolution and
incomplete pooling windows kept, so that short texts are never pooled to nothing; and ``dpcnn`` is
a real deep pyramid CNN (DeLFT's version discards its convolution path).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from textorch.data.cls_batching import ClsBatch
from textorch.errors import ConfigError
from textorch.models.padded_rnn import rnn_final_states, rnn_outputs


@dataclass(frozen=True)
class ClsArchitecture:
    name: str
    description: str
    layers: tuple[str, ...] = ()
    """Sequence layers in order: lstm, bilstm, gru, bigru, conv2, conv5tanh, pool2, dropout, dpcnn."""
    pooling: str = "maxavg"
    """maxavg (masked max and mean, concatenated), max, or gru_last (final state of a GRU)."""
    pooled_dropout: bool = False
    """Dropout on the pooled text vector, before the dense layer."""
    dense: bool = True
    head_dropout: bool = False
    """Dropout between the dense layer and the output layer."""
    builder: str = "text_classifier.v1"


_ARCHITECTURES = [
    ClsArchitecture("lstm", "LSTM -> max+mean pooling -> dense", ("lstm", "dropout"), head_dropout=True),
    ClsArchitecture("bidLstm_simple", "BiLSTM -> max+mean pooling -> dense", ("bilstm", "dropout"), head_dropout=True),
    ClsArchitecture("cnn", "3 x (conv, max pool) -> GRU final state -> dense",
                    ("dropout", "conv2", "pool2", "conv2", "pool2", "conv2", "pool2"), pooling="gru_last",
                    pooled_dropout=True),
    ClsArchitecture("cnn2", "3 x conv -> GRU final state -> dense", ("dropout", "conv2", "conv2", "conv2"), pooling="gru_last"),
    ClsArchitecture("cnn3", "GRU -> 3 x (conv, max pool) -> max+mean pooling -> dense",
                    ("gru", "conv2", "pool2", "conv2", "pool2", "conv2", "pool2")),
    ClsArchitecture("gru", "BiGRU -> BiGRU -> max+mean pooling -> dense (DeLFT's default)", ("bigru", "dropout", "bigru")),
    ClsArchitecture("gru_simple", "one BiGRU -> max+mean pooling -> dense", ("bigru",)),
    ClsArchitecture("gru_lstm", "BiGRU -> BiLSTM -> max+mean pooling -> dense", ("bigru", "dropout", "bilstm")),
    ClsArchitecture("lstm_cnn", "LSTM -> conv -> conv (tanh) -> max+mean pooling -> dense",
                    ("lstm", "dropout", "conv2", "conv5tanh"), head_dropout=True),
    ClsArchitecture("dpcnn", "deep pyramid CNN (region conv, residual conv blocks, halving pools) -> max pooling",
                    ("dpcnn",), pooling="max", dense=False),
    ClsArchitecture("bert", "a Hugging Face encoder (--transformer DIR) -> pooled [CLS] -> linear",
                    builder="transformer_classifier.v1"),
]
CLS_ARCHITECTURES: dict[str, ClsArchitecture] = {a.name: a for a in _ARCHITECTURES}


def get_cls_architecture(name: str) -> ClsArchitecture:
    try:
        return CLS_ARCHITECTURES[name]
    except KeyError:
        raise ConfigError(f"unknown architecture {name!r}; choose one of: {', '.join(CLS_ARCHITECTURES)}") from None


# ----------------------------------------------------------------------------- masked layers
def _masked_max_pool(x: torch.Tensor, mask: torch.Tensor, kernel: int, stride: int, padding: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Max pooling over time that never picks padding; a window is valid if it holds a real position."""
    h = x.masked_fill(~mask.unsqueeze(-1), float("-inf")).transpose(1, 2)  # (B, D, L)
    if padding:
        h = F.pad(h, (padding, padding), value=float("-inf"))
    pooled = F.max_pool1d(h, kernel, stride, ceil_mode=True).transpose(1, 2)
    m = F.pad(mask.float(), (padding, padding)) if padding else mask.float()
    new_mask = F.max_pool1d(m.unsqueeze(1), kernel, stride, ceil_mode=True).squeeze(1) > 0
    return pooled.masked_fill(~new_mask.unsqueeze(-1), 0.0), new_mask


class Recurrent(nn.Module):
    """(Bi)LSTM or (Bi)GRU returning every position; padding never enters a state
    (:func:`textorch.models.padded_rnn.rnn_outputs`)."""

    def __init__(self, input_dim: int, hidden: int, cell: str, bidirectional: bool) -> None:
        super().__init__()
        rnn_class = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn_class(input_dim, hidden, batch_first=True, bidirectional=bidirectional)
        self.output_dim = hidden * (2 if bidirectional else 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return rnn_outputs(self.rnn, x, mask.sum(dim=1)), mask


class Conv(nn.Module):
    """1-D convolution with Keras "same" padding (extra pad on the right for even kernels)."""

    def __init__(self, input_dim: int, filters: int, kernel: int, activation: str = "relu") -> None:
        super().__init__()
        self.conv = nn.Conv1d(input_dim, filters, kernel)
        self.pad = ((kernel - 1) // 2, kernel // 2)
        self.activation = torch.tanh if activation == "tanh" else torch.relu
        self.output_dim = filters

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.pad((x * mask.unsqueeze(-1)).transpose(1, 2), self.pad)  # (B, D, L + k - 1)
        h = self.activation(self.conv(h)).transpose(1, 2)
        return h * mask.unsqueeze(-1), mask


class Pool(nn.Module):
    def __init__(self, input_dim: int, size: int) -> None:
        super().__init__()
        self.size = size
        self.output_dim = input_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _masked_max_pool(x, mask, self.size, self.size)


class Dropout(nn.Module):
    def __init__(self, input_dim: int, rate: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(rate)
        self.output_dim = input_dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.dropout(x), mask


class DPCNN(nn.Module):
    """Johnson and Zhang's deep pyramid CNN: region convolution, then blocks of
    (pool to half length, two pre-activated convolutions, shortcut)."""

    def __init__(self, input_dim: int, filters: int, blocks: int = 3) -> None:
        super().__init__()
        self.region = Conv(input_dim, filters, 3, activation="relu")
        self.first = nn.ModuleList([Conv(filters, filters, 3), Conv(filters, filters, 3)])
        self.blocks = nn.ModuleList(nn.ModuleList([Conv(filters, filters, 3), Conv(filters, filters, 3)]) for _ in range(blocks))
        self.output_dim = filters

    @staticmethod
    def _residual(convs: nn.ModuleList, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = x
        for conv in convs:
            h, _ = conv(torch.relu(h), mask)
        return x + h

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, _ = self.region(x, mask)
        x = self._residual(self.first, x, mask)
        for convs in self.blocks:
            x, mask = _masked_max_pool(x, mask, 3, 2, padding=1)
            x = self._residual(convs, x, mask)
        return x, mask


class MaxMeanPooling(nn.Module):
    def __init__(self, input_dim: int, with_mean: bool = True) -> None:
        super().__init__()
        self.with_mean = with_mean
        self.output_dim = input_dim * (2 if with_mean else 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask.unsqueeze(-1)
        maxed = x.masked_fill(~m, float("-inf")).max(dim=1).values
        if not self.with_mean:
            return maxed
        mean = (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
        return torch.cat([maxed, mean], dim=-1)


class GRULastState(nn.Module):
    """A GRU read to the last real position of each text; its final state is the text vector."""

    def __init__(self, input_dim: int, hidden: int) -> None:
        super().__init__()
        self.rnn = nn.GRU(input_dim, hidden, batch_first=True)
        self.output_dim = hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return rnn_final_states(self.rnn, x, mask.sum(dim=1))


class WordInput(nn.Module):
    """Frozen pre-trained vectors from the batch, or a learned embedding when ``vocab_size > 0``."""

    def __init__(self, word_dim: int, vocab_size: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, word_dim, padding_idx=0) if vocab_size > 0 else None
        self.output_dim = word_dim

    def forward(self, batch: ClsBatch) -> torch.Tensor:
        if self.embedding is not None:
            return self.embedding(batch.token_ids)
        if batch.word_vectors is None:
            raise ValueError("this model needs word vectors but the batch has none")
        return batch.word_vectors


class TextClassifierNet(nn.Module):
    """Word input -> sequence layers -> pooling -> dense head; ``forward`` gives logits (B, C)."""

    def __init__(self, word_input: WordInput, layers: nn.ModuleList, pooling: nn.Module, head: nn.Sequential) -> None:
        super().__init__()
        self.word_input = word_input
        self.layers = layers
        self.pooling = pooling
        self.head = head

    def forward(self, batch: ClsBatch) -> torch.Tensor:
        x, mask = self.word_input(batch), batch.mask
        for layer in self.layers:
            x, mask = layer(x, mask)
        return self.head(self.pooling(x, mask))


def _layer(spec: str, input_dim: int, hidden: int, dropout: float) -> nn.Module:
    if spec in ("lstm", "gru", "bilstm", "bigru"):
        return Recurrent(input_dim, hidden, spec.removeprefix("bi"), spec.startswith("bi"))
    if spec == "conv2":
        return Conv(input_dim, hidden, 2)
    if spec == "conv5tanh":
        return Conv(input_dim, hidden, 5, activation="tanh")
    if spec == "pool2":
        return Pool(input_dim, 2)
    if spec == "dropout":
        return Dropout(input_dim, dropout)
    if spec == "dpcnn":
        return DPCNN(input_dim, hidden)
    raise ValueError(f"unknown layer {spec!r}")


def build_text_classifier_v1(
    architecture: str,
    n_classes: int,
    word_dim: int,
    vocab_size: int = 0,
    hidden: int = 64,
    dense_size: int = 32,
    dropout: float = 0.3,
) -> TextClassifierNet:
    """Build from flat arguments; ``vocab_size == 0`` means frozen pre-trained vectors of ``word_dim``."""
    arch = get_cls_architecture(architecture)
    if arch.builder != "text_classifier.v1":
        raise ConfigError(f"architecture {architecture!r} is built by {arch.builder}")
    word_input = WordInput(word_dim, vocab_size)
    layers, dim = [], word_input.output_dim
    for spec in arch.layers:
        layers.append(_layer(spec, dim, hidden, dropout))
        dim = layers[-1].output_dim
    pooling = GRULastState(dim, hidden) if arch.pooling == "gru_last" else MaxMeanPooling(dim, arch.pooling == "maxavg")
    parts: list[nn.Module] = []
    dim = pooling.output_dim
    if arch.pooled_dropout:
        parts.append(nn.Dropout(dropout))
    if arch.dense:
        parts += [nn.Linear(dim, dense_size), nn.ReLU()]
        dim = dense_size
    if arch.head_dropout:
        parts.append(nn.Dropout(dropout))
    parts.append(nn.Linear(dim, n_classes))
    return TextClassifierNet(word_input, nn.ModuleList(layers), pooling, nn.Sequential(*parts))


# ----------------------------------------------------------------------------- transformers
class TransformerClassifierNet(nn.Module):
    """A Hugging Face encoder, its pooled [CLS] vector (the pooler when it has one), dropout, linear."""

    def __init__(self, encoder: nn.Module, n_classes: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(int(encoder.config.hidden_size), n_classes)

    def forward(self, batch: ClsBatch) -> torch.Tensor:
        return self.logits(batch.token_ids, batch.mask.long())

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, C) from plain tensors: the one computation, shared by ``forward`` and the ONNX export."""
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        pooled = getattr(out, "pooler_output", None)
        if pooled is None:
            pooled = out.last_hidden_state[:, 0]
        return self.output(self.dropout(pooled))


def build_transformer_classifier_v1(encoder: nn.Module, n_classes: int, dropout: float = 0.1) -> TransformerClassifierNet:
    """Wrap an encoder made by ``textorch.models.transformer_source`` (pre-trained, or rebuilt from a saved config)."""
    return TransformerClassifierNet(encoder, n_classes, dropout)


CLS_BUILDERS = {
    "text_classifier.v1": build_text_classifier_v1,
    "transformer_classifier.v1": build_transformer_classifier_v1,
}


# ----------------------------------------------------------------------------- ensembles
class ClassifierEnsemble(nn.Module):
    """N networks trained on N folds, combined by normalised geometric mean of probabilities (as DeLFT)."""

    def __init__(self, members: list[nn.Module], multi_label: bool) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.multi_label = multi_label

    def forward(self, batch: ClsBatch, member: int | None = None) -> torch.Tensor:
        """Logits (B, C) of one member, or of the ensemble (log of the combined probabilities)."""
        if member is not None:
            return self.members[member](batch)
        if len(self.members) == 1:
            return self.members[0](batch)
        logits = torch.stack([m(batch).float() for m in self.members])  # (N, B, C)
        if not self.multi_label:
            return F.log_softmax(logits, dim=-1).mean(dim=0)
        log_p = F.logsigmoid(logits).mean(dim=0).clamp(max=-1e-7)
        return log_p - torch.log(-torch.expm1(log_p))
