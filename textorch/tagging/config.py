"""Configuration of a sequence-labelling model and its data, split by concern; every default lives here.

The CLI builds its options from these fields, and the resolved values are written into the
model directory's ``config.json``. Optimisation (``TrainConfig``) is shared with classification
and lives in ``textorch.train.config``; it is re-exported here for the older import path.
"""

from __future__ import annotations

from dataclasses import dataclass

from textorch.errors import ConfigError
from textorch.models.architecture_table import (
    ARCHITECTURES,
    RNN_TAGGER_V3,
    TRANSFORMER_V2,
    get_architecture,
)
from textorch.train.config import BERT_GROUP, PRECISIONS, TrainConfig, from_dict, option, to_dict

WORD_LOOKUPS = ("exact_or_lower", "delft")
DATA_FORMATS = ("conll", "grobid")
CRF_TRANSITIONS = ("iob2", "learned")

TASK = "sequence_labelling"
"""The task a tagger's model directory names, checked when it is loaded."""

__all__ = ["PRECISIONS", "DataConfig", "ModelConfig", "TrainConfig", "from_dict", "saved_configs", "to_dict"]


@dataclass(frozen=True)
class ModelConfig:
    """Network shape. Defaults are DeLFT's for the BiLSTM family."""

    architecture: str = option(
        "BidLSTM_CRF", "model architecture (default: {default}; see 'textorch seq architectures')",
        choices=ARCHITECTURES, metavar="NAME")
    char_dim: int = 25
    """Character embedding size."""
    char_hidden: int = 25
    """Character BiLSTM units per direction (the char CNN uses twice this many filters)."""
    word_hidden: int = 100
    """Word-level BiLSTM/BiGRU units per direction."""
    dense_hidden: int = 100
    """Units of the tanh layer between the recurrent encoder and the output layer, as DeLFT's
    BiLSTM family has (0: none). Models saved before this option existed have none."""
    feature_dim: int = 4
    """Embedding size of each categorical feature column."""
    feature_output_dim: int = 32
    """Size of the projected feature channel."""
    dropout: float = option(0.5, "dropout")
    max_char_length: int = 30
    """Characters of a token seen by the character encoder."""
    transformer: str | None = option(
        None, "Hugging Face model directory, transformers-registry name or hub name (required by BERT*)",
        metavar="PATH", group=BERT_GROUP)
    """BERT family: local Hugging Face model directory, transformers-registry name or hub name."""
    transformer_window: int = option(
        0, "sub-tokens per encoder window, special tokens included (default: {default}, the encoder's limit)",
        metavar="N", group=BERT_GROUP)
    """Sub-tokens per encoder window, special tokens included (0: the encoder's limit)."""
    transformer_stride: int = option(
        0, "sub-tokens between the starts of overlapping windows (default: {default}, half a window)",
        metavar="N", group=BERT_GROUP)
    """Sub-tokens between the starts of consecutive windows (0: half a window)."""
    transformer_dropout: float = option(0.1, "dropout on the word vectors of BERT* models", group=BERT_GROUP)
    """Dropout on the BERT family's word vectors (``dropout`` is for the recurrent family)."""
    word_layers: int = 1
    """Stacked bidirectional layers of the word-level encoder (DeLFT's BidGRU_CRF has two)."""
    casing_dim: int = 8
    """Casing embedding size (``_CASING`` architectures)."""
    char_cnn_filters: int = 0
    """Filters of the character CNN (0: twice ``char_hidden``)."""
    char_cnn_pooling: str = "chars"
    """``chars``: max over a token's characters; ``padded``: tanh, then max over the token
    padded to ``max_char_length`` with the padding positions included, as DeLFT 1.x computes."""
    feature_encoder: str = "dense"
    """``dense``: feature embeddings concatenated, then a tanh projection; ``lstm``: a BiLSTM
    over the feature columns, final states of both directions (DeLFT 1.x; ``feature_output_dim``
    is then twice its units)."""

    crf_template: str | None = option(
        None, "*_TEMPLATE models: a CRF++ template (GROBID's MODEL.crf-template) whose features feed the emissions "
              "(default: generated from the data's columns)", metavar="FILE")
    """``_TEMPLATE`` architectures: a CRF++ template file (GROBID's ``MODEL.crf-template``) whose
    unigram features feed the emissions; None generates one from the training data's columns.
    The template is saved with the model."""
    template_dropout: float = 0.3
    """``_TEMPLATE`` architectures: share of each token's template features dropped at each
    training step, so that the BiLSTM keeps learning beside weights that can memorise the
    training data (docs/performance.md has the comparison)."""

    crf_transitions: str = option(
        "iob2", "*_TEMPLATE models: iob2 fixes the CRF moves IOB2 rules out (I-X after anything but B-X/I-X, or "
                "opening a sequence) so that no path takes them; learned leaves all to training, as DeLFT's CRF",
        choices=CRF_TRANSITIONS)
    """``_TEMPLATE`` architectures: ``iob2`` fixes the CRF's moves that IOB2 rules out (an ``I-X``
    after anything but ``B-X`` / ``I-X``, or opening a sequence) at a score no path takes
    (:meth:`textorch.models.crf.CRF.forbid`); ``learned`` leaves every move to training, as
    DeLFT's CRF does (DeLFT's architectures always learn all of them)."""

    transformer_crf: str = "words"
    """BERT family with a CRF: ``words`` (over each word's first sub-token) or ``subtokens`` (over
    every sub-token of the encoder window, as DeLFT 1.x's BERT_CRF; tagging only)."""

    def builder(self) -> str:
        """The builder a saved model names: ``rnn_tagger.v3`` / ``transformer_tagger.v2`` only where
        the network needs their options, so that a release without them refuses the directory
        instead of misreading it; else the architecture's own."""
        if self.transformer_crf == "subtokens":
            return TRANSFORMER_V2
        if get_architecture(self.architecture).template:
            return get_architecture(self.architecture).builder
        if (self.word_layers, self.casing_dim, self.char_cnn_filters, self.char_cnn_pooling,
                self.feature_encoder) != (1, 8, 0, "chars", "dense"):
            return RNN_TAGGER_V3
        return get_architecture(self.architecture).builder

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0.0 <= self.template_dropout < 1.0:
            raise ConfigError(f"template_dropout must be in [0, 1), got {self.template_dropout}")
        if not 0.0 <= self.transformer_dropout < 1.0:
            raise ConfigError(f"transformer_dropout must be in [0, 1), got {self.transformer_dropout}")
        if self.transformer_window < 0 or self.transformer_stride < 0:
            raise ConfigError("--transformer-window and --transformer-stride must be >= 0 (0: automatic)")
        if self.crf_transitions not in CRF_TRANSITIONS:
            raise ConfigError(f"crf_transitions must be one of {', '.join(CRF_TRANSITIONS)}, got {self.crf_transitions!r}")
        if self.transformer_crf not in ("words", "subtokens"):
            raise ConfigError(f"transformer_crf must be 'words' or 'subtokens', got {self.transformer_crf!r}")
        if self.char_cnn_pooling not in ("chars", "padded"):
            raise ConfigError(f"char_cnn_pooling must be 'chars' or 'padded', got {self.char_cnn_pooling!r}")
        if self.feature_encoder not in ("dense", "lstm"):
            raise ConfigError(f"feature_encoder must be 'dense' or 'lstm', got {self.feature_encoder!r}")
        if self.feature_encoder == "lstm" and self.feature_output_dim % 2:
            raise ConfigError("feature_output_dim must be even with feature_encoder 'lstm' (two directions)")
        if self.char_cnn_filters < 0:
            raise ConfigError(f"char_cnn_filters must be >= 0 (0: twice char_hidden), got {self.char_cnn_filters}")
        if self.dense_hidden < 0:
            raise ConfigError(f"dense_hidden must be >= 0 (0: no dense layer), got {self.dense_hidden}")
        for name in ("char_dim", "char_hidden", "word_hidden", "feature_dim", "feature_output_dim", "max_char_length",
                     "word_layers", "casing_dim"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class DataConfig:
    """How the input is read and which external resources feed the model."""

    format: str | None = option(None, "input format (default: detected)", choices=DATA_FORMATS)
    """``conll`` or ``grobid``; None detects it from the file."""
    embeddings: str = option("none", "registry name, path to a GloVe/word2vec/fastText file, or none (default)")
    """Registry name, path of a GloVe/word2vec/fastText file, or ``none``."""
    feature_columns: str | None = option(
        None, "GROBID feature columns for *_FEATURES models, e.g. 9-15 (default: chosen from the data)",
        aliases=("--features-indices",))
    """GROBID feature columns for the feature channel, e.g. ``9-15``; None chooses from the data."""
    feature_vocabulary_size: int = option(
        32, "when choosing feature columns from the data: the most distinct values of a feature column",
        aliases=("--features-vocabulary-size",), metavar="N")
    """When choosing from the data: the most distinct values a column may have to be a feature
    (``textorch grobid`` uses DeLFT's ``features_vocabulary_size``, 12)."""
    word_lookup: str = option(
        "exact_or_lower", "how a token finds its word vector: exact_or_lower (the token, else its lower case; "
                          "default) or delft (digits to 0, then the exact form only: DeLFT's rule, which "
                          "'export onnx --layout delft' needs, since DeLFT's Java runner looks words up so)",
        choices=WORD_LOOKUPS)
    """How a token finds its word vector: ``exact_or_lower`` (the token, else its lower case,
    else zeros) or ``delft`` (digits replaced by 0, then the exact form only, else zeros: what
    DeLFT 1.x does, kept by models imported from it)."""

    def __post_init__(self) -> None:
        if self.feature_vocabulary_size < 1:
            raise ConfigError(f"--feature-vocabulary-size must be >= 1, got {self.feature_vocabulary_size}")
        if self.word_lookup not in WORD_LOOKUPS:
            raise ConfigError(f"word_lookup must be 'exact_or_lower' or 'delft', got {self.word_lookup!r}")


def named_feature_columns(model: ModelConfig, data: DataConfig) -> str | None:
    """The feature columns the user named, when the architecture reads features (else None: a
    model without features never looks at feature columns)."""
    return data.feature_columns if get_architecture(model.architecture).features else None


def saved_configs(config: dict, builder: str) -> tuple[ModelConfig, DataConfig, str, int]:
    """The model and data configs of a saved ``config.json``, with the input format and number of
    feature columns the model was trained on; ``rnn_tagger.v1`` networks had no dense layer."""
    model_section = dict(config["model"])
    if builder == "rnn_tagger.v1":
        model_section["dense_hidden"] = 0
    data_section = dict(config["data"])
    input_format = data_section.pop("input_format", "conll")
    n_features = int(data_section.pop("n_features", 0))
    return from_dict(ModelConfig, model_section), from_dict(DataConfig, data_section), input_format, n_features  # type: ignore[return-value]
