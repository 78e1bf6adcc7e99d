"""Transformer embedder and the ``transformer_tagger.v1`` builder (the BERT family).

The embedder wraps any Hugging Face encoder module (received ready-made: pre-trained weights
at build time, an empty shell filled from ``model.safetensors`` at load time) and turns the
windows of a :class:`~textorch.data.subwords.WindowedBatch` into one vector per word. The rest
of a BERT architecture is the same parts as the recurrent family: optional char BiLSTM and
feature channel, an identity encoder, a softmax or CRF head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from textorch.data.batching import Batch
from textorch.errors import ConfigError
from textorch.models.embedders import CharBiLSTMEmbedder, CharCNNEmbedder, Embedder, FeatureEmbedder
from textorch.models.encoders import IdentityEncoder
from textorch.models.heads import CRFHead, SoftmaxHead
from textorch.models import costs
from textorch.models.graph_capture import being_captured
from textorch.models.length_groups import in_length_groups, length_groups
from textorch.models.tagger import SequenceTagger

if TYPE_CHECKING:  # architectures.py imports this module to register the builder
    from textorch.models.architecture_table import Architecture


class TransformerEmbedder(Embedder):
    """First-sub-token vectors of each word, read from the window chosen by the data pipeline."""

    def __init__(self, encoder: nn.Module, hidden_size: int) -> None:
        super().__init__()
        # A pooler is never used for tagging; dropping it keeps every parameter trained (DDP
        # refuses parameters without gradients) and the saved weights smaller. The same is done
        # at build and load time, so the state dict keys always match.
        if getattr(encoder, "pooler", None) is not None:
            encoder.pooler = None
        self.encoder = encoder
        self.output_dim = hidden_size

    graph_inputs = ("input_ids", "attention_mask", "word_index")
    """The sub-token windows and where each word is read in them."""

    def export_form(self) -> nn.Module:
        return _WindowWords(self)

    def forward(self, batch: Batch) -> torch.Tensor:
        window_ids = getattr(batch, "window_ids", None)
        if window_ids is None:
            raise ValueError("a transformer model needs a WindowedBatch (sub-token windows)")
        return self.words(window_ids, batch.window_mask, batch.word_index)

    def words(self, window_ids: torch.Tensor, window_mask: torch.Tensor, word_index: torch.Tensor) -> torch.Tensor:
        """(B, L, H) from plain tensors: the one computation, shared by ``forward`` and the ONNX export."""
        hidden = self.windows(window_ids, window_mask)  # (N, W, H)
        flat = hidden.reshape(-1, hidden.shape[-1])  # (N * W, H)
        return flat[word_index]  # (B, L, H)

    def windows(self, window_ids: torch.Tensor, window_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's ``(N, W, H)`` output; at inference, windows of similar length run together.

        A batch's windows are padded to its longest, and every padded position costs as much as
        a real one (more, in attention). Tagging therefore runs groups of windows of similar
        length, each cut to its own longest (:func:`length_groups`), and puts the outputs back in
        place: the attention mask keeps padding out of every real position, so results are the
        same up to rounding. Training, export (a captured graph) and GPUs (measured only on the CPU, where
        the cost model comes from) run the one padded call.
        """
        lengths = window_mask.sum(dim=1)
        groups = None
        if (window_ids.device.type == "cpu" and not torch.is_grad_enabled() and window_ids.shape[0] > 1
                and not being_captured()):
            groups = length_groups(lengths, costs.WINDOW_GROUP_COSTS)
        if groups is None:
            return self.encoder(input_ids=window_ids, attention_mask=window_mask).last_hidden_state
        return in_length_groups(
            lambda ids, mask, _: self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state,
            [window_ids, window_mask], lengths, groups, steps=window_ids.shape[1])


class SubtokenCRFTagger(SequenceTagger):
    """A transformer tagger whose CRF runs over every sub-token of each encoder window (special
    tokens included), the label of a word being that of its first sub-token: DeLFT 1.x's
    BERT_CRF, which textorch imports (``transformer_crf="subtokens"``). Its Viterbi paths differ
    from a CRF over words, so an imported model keeps it. For tagging only: training uses the
    word-level loss of :class:`SequenceTagger`."""

    def decode(self, batch: Batch, with_scores: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        embedder = self.embedders[0]
        hidden = embedder.windows(batch.window_ids, batch.window_mask)  # (N, W, H)
        # The head decodes the windows as it decodes words (the CPU's one decoder where it may).
        paths, chosen = self.head.decode(hidden, batch.window_mask.bool(), with_scores)
        labels = paths.reshape(-1)[batch.word_index] * batch.mask
        if chosen is None:
            return labels, None
        return labels, chosen.reshape(-1)[batch.word_index] * batch.mask


def build_transformer_tagger_v1(
    architecture: Architecture,
    encoder: nn.Module,
    hidden_size: int,
    n_chars: int,
    n_labels: int,
    feature_vocab_sizes: list[int],
    char_dim: int = 25,
    char_hidden: int = 25,
    feature_dim: int = 4,
    feature_output_dim: int = 32,
    dropout: float = 0.1,
    crf_over_subtokens: bool = False,
) -> SequenceTagger:
    """Transformer (+ char encoder) (+ features) -> identity -> softmax or CRF, from flat arguments;
    ``crf_over_subtokens``: a :class:`SubtokenCRFTagger` (``transformer_tagger.v2``)."""
    if crf_over_subtokens and (architecture.head != "crf" or architecture.char_encoder != "none" or architecture.features):
        raise ConfigError(f"a CRF over sub-tokens is for BERT_CRF-like architectures, not {architecture.name}")
    embedders: list[nn.Module] = [TransformerEmbedder(encoder, hidden_size)]
    if architecture.char_encoder == "lstm":
        embedders.append(CharBiLSTMEmbedder(n_chars, char_dim, char_hidden))
    elif architecture.char_encoder == "cnn":
        embedders.append(CharCNNEmbedder(n_chars, char_dim, filters=2 * char_hidden))
    if architecture.features:
        if not feature_vocab_sizes:
            raise ConfigError(
                f"{architecture.name} needs categorical feature columns, but the training data has "
                "none (use a GROBID-format file, or an architecture without _FEATURES)"
            )
        embedders.append(FeatureEmbedder(feature_vocab_sizes, feature_dim, feature_output_dim))
    input_dim = sum(e.output_dim for e in embedders)
    head_class = CRFHead if architecture.head == "crf" else SoftmaxHead
    tagger_class = SubtokenCRFTagger if crf_over_subtokens else SequenceTagger
    return tagger_class(nn.ModuleList(embedders), IdentityEncoder(input_dim), head_class(input_dim, n_labels), dropout)


class _WindowWords(nn.Module):
    """:meth:`TransformerEmbedder.words` as a module of the window tensors (its export form)."""

    def __init__(self, embedder: TransformerEmbedder) -> None:
        super().__init__()
        self.embedder = embedder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, word_index: torch.Tensor) -> torch.Tensor:
        return self.embedder.words(input_ids, attention_mask, word_index)
