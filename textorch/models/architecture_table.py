"""The named architectures (DeLFT's names) and which parts each combines, without the network code.

Kept apart from :mod:`textorch.models.architectures` (the builders) so that reading a model's
config, choosing an option's values or parsing a command line does not import PyTorch: a
tagging command that runs its network with ONNX Runtime never needs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from textorch.errors import ConfigError


RNN_TAGGER_V1 = "rnn_tagger.v1"
# v2 = v1 plus the optional dense layer (``dense_hidden``); a v1 directory has none, and an
# older release refuses a v2 directory by name instead of failing on its weights.
RNN_TAGGER_V2 = "rnn_tagger.v2"
# v3 = v2 plus the options DeLFT 1.x's networks need (stacked word layers, casing size, DeLFT's
# character CNN and feature BiLSTM); only a network using one of them is saved as v3.
RNN_TAGGER_V3 = "rnn_tagger.v3"
# v4 = v3 plus CRF-template features added to the emissions (``template_rows``).
RNN_TAGGER_V4 = "rnn_tagger.v4"
TRANSFORMER_V1 = "transformer_tagger.v1"
# transformer v2 = v1 plus the CRF over sub-tokens of DeLFT's BERT_CRF (``transformer_crf``).
TRANSFORMER_V2 = "transformer_tagger.v2"
RNN_BUILDERS = (RNN_TAGGER_V1, RNN_TAGGER_V2, RNN_TAGGER_V3, RNN_TAGGER_V4)
"""The builders of the recurrent taggers (every builder but the transformer ones)."""
TRANSFORMER_BUILDERS = (TRANSFORMER_V1, TRANSFORMER_V2)


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
    builder: str = RNN_TAGGER_V2
    template: bool = False
    """Adds a CRF's template features to the emissions (:mod:`textorch.models.template_emissions`)."""

    @property
    def uses_transformer(self) -> bool:
        """Whether the model needs ``--transformer`` (and sub-token windows in its batches)."""
        return self.builder.startswith("transformer_tagger.")


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
        features=True, template=True, builder=RNN_TAGGER_V4,
    ),
    Architecture("BidLSTM_CRF_TEMPLATE", "same as BidLSTM_CRF_FEATURES_TEMPLATE (its first name; GROBID would "
                 "not hand it features)", features=True, template=True, builder=RNN_TAGGER_V4),
]
ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in _ARCHITECTURES}


def get_architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ConfigError(
            f"unknown architecture {name!r}; choose one of: {', '.join(ARCHITECTURES)}"
        ) from None

