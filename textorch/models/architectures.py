"""Named architectures (DeLFT's names) as compositions of parts, with versioned builders.

A saved model records ``architecture`` and ``builder`` (e.g. ``"rnn_tagger.v1"``); a later
release may add ``rnn_tagger.v2`` but keeps v1 so that every model directory stays loadable.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from textorch.data.encoding import CASING_CLASSES
from textorch.errors import ConfigError
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


@dataclass(frozen=True)
class Architecture:
    """Which parts a named architecture combines."""

    name: str
    description: str
    char_encoder: str = "lstm"  # "lstm" | "cnn" | "none"
    casing: bool = False
    features: bool = False
    cell: str = "lstm"  # word-level encoder cell
    head: str = "crf"  # "crf" | "softmax"
    builder: str = "rnn_tagger.v2"
    template: bool = False
    """Adds a CRF's template features to the emissions (:mod:`textorch.models.template_emissions`)."""

    @property
    def uses_transformer(self) -> bool:
        """Whether the model needs ``--transformer`` (and sub-token windows in its batches)."""
        return self.builder.startswith("transformer_tagger.")


TRANSFORMER_V1 = "transformer_tagger.v1"

_ARCHITECTURES = [
    Architecture("BidLSTM", "word vectors + char BiLSTM -> BiLSTM -> softmax", head="softmax"),
    Architecture("BidLSTM_CRF", "word vectors + char BiLSTM -> BiLSTM -> CRF (Lample et al.)"),
    Architecture("BidLSTM_ChainCRF", "same as BidLSTM_CRF (one CRF implementation serves both names)"),
    Architecture("BidLSTM_CNN", "word vectors + char CNN -> BiLSTM -> softmax", char_encoder="cnn", head="softmax"),
    Architecture("BidLSTM_CNN_CRF", "word vectors + char CNN -> BiLSTM -> CRF (Ma and Hovy)", char_encoder="cnn"),
    Architecture("BidGRU_CRF", "word vectors + char BiLSTM -> BiGRU -> CRF", cell="gru"),
    Architecture("BidLSTM_CRF_CASING", "BidLSTM_CRF plus a casing embedding", casing=True),
    Architecture("BidLSTM_CRF_FEATURES", "BidLSTM_CRF plus categorical feature columns (GROBID)", features=True),
    Architecture(
        "BidLSTM_ChainCRF_FEATURES", "same as BidLSTM_CRF_FEATURES (one CRF implementation)", features=True
    ),
    *(
        Architecture(name, description, char_encoder=chars, features=features, head=head, builder=TRANSFORMER_V1)
        for name, description, chars, features, head in [
            ("BERT", "transformer (first sub-token of each word) -> softmax", "none", False, "softmax"),
            ("BERT_FEATURES", "transformer + categorical feature columns -> softmax", "none", True, "softmax"),
            ("BERT_CRF", "transformer -> CRF", "none", False, "crf"),
            ("BERT_ChainCRF", "same as BERT_CRF (one CRF implementation serves both names)", "none", False, "crf"),
            ("BERT_CRF_FEATURES", "transformer + categorical feature columns -> CRF", "none", True, "crf"),
            ("BERT_ChainCRF_FEATURES", "same as BERT_CRF_FEATURES (one CRF implementation)", "none", True, "crf"),
            ("BERT_CRF_CHAR", "transformer + char BiLSTM -> CRF", "lstm", False, "crf"),
            ("BERT_CRF_CHAR_FEATURES", "transformer + char BiLSTM + feature columns -> CRF", "lstm", True, "crf"),
        ]
    ),
    # textorch's own, after DeLFT's names
    # GROBID hands a model its layout features only when the architecture's name holds
    # "FEATURE" (DeLFTModel's label task), hence the name.
    Architecture(
        "BidLSTM_CRF_FEATURES_TEMPLATE",
        "BidLSTM_CRF_FEATURES whose emissions add a CRF's template features (GROBID's CRF++ templates, or ones "
        "generated from the columns), trained jointly",
        features=True, template=True, builder="rnn_tagger.v4",
    ),
    Architecture("BidLSTM_CRF_TEMPLATE", "same as BidLSTM_CRF_FEATURES_TEMPLATE (its first name; GROBID would "
                 "not hand it features)", features=True, template=True, builder="rnn_tagger.v4"),
]
ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in _ARCHITECTURES}


def get_architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ConfigError(
            f"unknown architecture {name!r}; choose one of: {', '.join(ARCHITECTURES)}"
        ) from None


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


# v2 = v1 plus the optional dense layer (``dense_hidden``); a v1 directory has none, and an
# older release refuses a v2 directory by name instead of failing on its weights.
# v3 = v2 plus the options DeLFT 1.x's networks need (stacked word layers, casing size, DeLFT's
# character CNN and feature BiLSTM); only a network using one of them is saved as v3.
RNN_TAGGER_V3 = "rnn_tagger.v3"
# transformer v2 = v1 plus the CRF over sub-tokens of DeLFT's BERT_CRF (``transformer_crf``).
TRANSFORMER_V2 = "transformer_tagger.v2"
# v4 = v3 plus CRF-template features added to the emissions (``template_rows``).
RNN_TAGGER_V4 = "rnn_tagger.v4"
BUILDERS = {"rnn_tagger.v1": build_rnn_tagger_v1, "rnn_tagger.v2": build_rnn_tagger_v1,
            RNN_TAGGER_V3: build_rnn_tagger_v1, RNN_TAGGER_V4: build_rnn_tagger_v1,
            TRANSFORMER_V1: build_transformer_tagger_v1, TRANSFORMER_V2: build_transformer_tagger_v1}
"""Versioned builders; saved models name theirs, so a later ``.v2`` never breaks an old model."""
