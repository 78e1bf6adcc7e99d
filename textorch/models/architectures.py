"""The versioned builders of the named architectures (:mod:`textorch.models.architecture_table`).

A saved model records ``architecture`` and ``builder`` (e.g. ``"rnn_tagger.v1"``); a later
release may add ``rnn_tagger.v2`` but keeps v1 so that every model directory stays loadable.
"""

from __future__ import annotations

from torch import nn

from textorch.data.encoding import CASING_CLASSES
from textorch.errors import ConfigError
from textorch.models.architecture_table import RNN_BUILDERS, TRANSFORMER_BUILDERS, Architecture
from textorch.models.embedders import (
    CasingEmbedder,
    CharBiLSTMEmbedder,
    CharCNNEmbedder,
    FeatureEmbedder,
    FeatureLSTMEmbedder,
    WordVectorEmbedder,
)
from textorch.models.encoders import RecurrentEncoder
from textorch.models.heads import CRFHead, SoftmaxHead
from textorch.models.tagger import SequenceTagger
from textorch.models.template_emissions import TemplateEmissions
from textorch.models.transformer import build_transformer_tagger_v1


def check_builder(name: str) -> None:
    """A saved model names its builder; refuse one this release does not have (a newer model)."""
    if name not in BUILDERS:
        raise ConfigError(f"unknown model builder {name!r}; this textorch has: {', '.join(BUILDERS)}")


def build_rnn_tagger_v1(
    architecture: Architecture,
    n_chars: int,
    n_labels: int,
    feature_vocab_sizes: list[int],
    word_dim: int,
    char_dim: int = 25,
    char_hidden: int = 25,
    word_hidden: int = 100,
    feature_dim: int = 4,
    feature_output_dim: int = 32,
    dropout: float = 0.5,
    dense_hidden: int = 0,
    word_layers: int = 1,
    casing_dim: int = 8,
    char_cnn_filters: int = 0,
    char_cnn_padded_to: int = 0,
    feature_encoder: str = "dense",
    template_rows: int = 0,
    template_dropout: float = 0.0,
) -> SequenceTagger:
    """Build from flat arguments; ``word_dim == 0`` means no pre-trained word vectors.

    The arguments after ``dense_hidden`` are the ``rnn_tagger.v3`` options (see
    :class:`textorch.tagging.config.ModelConfig`); their defaults build the v1/v2 network."""
    embedders: list[nn.Module] = []
    if word_dim > 0:
        embedders.append(WordVectorEmbedder(word_dim))
    if architecture.char_encoder == "lstm":
        embedders.append(CharBiLSTMEmbedder(n_chars, char_dim, char_hidden))
    elif architecture.char_encoder == "cnn":
        filters = char_cnn_filters or 2 * char_hidden
        embedders.append(CharCNNEmbedder(n_chars, char_dim, filters=filters, padded_to=char_cnn_padded_to))
    if architecture.casing:
        embedders.append(CasingEmbedder(len(CASING_CLASSES), casing_dim))
    if architecture.features:
        if not feature_vocab_sizes:
            raise ConfigError(
                f"{architecture.name} needs categorical feature columns, but the training data has none "
                "(use a GROBID-format file, or an architecture without _FEATURES)"
            )
        feature_class = FeatureLSTMEmbedder if feature_encoder == "lstm" else FeatureEmbedder
        embedders.append(feature_class(feature_vocab_sizes, feature_dim, feature_output_dim))
    input_dim = sum(e.output_dim for e in embedders)
    encoder = RecurrentEncoder(input_dim, word_hidden, cell=architecture.cell, layers=word_layers)
    head_class = CRFHead if architecture.head == "crf" else SoftmaxHead
    head = head_class(encoder.output_dim, n_labels, dense_hidden)
    templates = TemplateEmissions(template_rows, n_labels, template_dropout) if architecture.template else None
    return SequenceTagger(nn.ModuleList(embedders), encoder, head, dropout, templates)


BUILDERS = {**dict.fromkeys(RNN_BUILDERS, build_rnn_tagger_v1),
            **dict.fromkeys(TRANSFORMER_BUILDERS, build_transformer_tagger_v1)}
"""Versioned builders; saved models name theirs, so a later ``.v2`` never breaks an old model."""
