"""Configuration of a text classifier and its data; every default lives here.

The ``cls`` commands build their options from these fields and the resolved values are written
into the model directory's ``config.json``; :func:`saved_configs` reads them back. Optimisation
(``TrainConfig``) is shared with tagging and lives in ``textorch.train.config``.
"""

from __future__ import annotations

from dataclasses import dataclass

from textorch.data.cls_readers import CLS_FORMATS
from textorch.errors import ConfigError
from textorch.models.classifiers import CLS_ARCHITECTURES, get_cls_architecture
from textorch.train.config import from_dict, option

TASK = "text_classification"
"""The ``task`` a classifier's model directory names."""
TRANSFORMER_BUILDER = "transformer_classifier.v1"
"""The builder of the ``bert`` architecture, whose members share a pre-trained encoder's layout."""


@dataclass(frozen=True)
class ClsModelConfig:
    """Network shape; defaults are DeLFT's for its classification models."""

    architecture: str = option(
        "gru", "model architecture (default: {default}, or bert with --transformer; see 'textorch cls architectures')",
        choices=CLS_ARCHITECTURES, metavar="NAME", cli_default=None)
    """A name of ``CLS_ARCHITECTURES``. The command line leaves it unset (None) when not given, so that
    ``--transformer`` alone picks ``bert``."""
    hidden: int = option(64, "recurrent units / convolution filters")
    """Recurrent units per direction, and convolution filters (DeLFT's ``recurrent_units``)."""
    dense_size: int = option(32, "dense layer size")
    dropout: float = option(0.3, "dropout")
    max_length: int = option(300, "tokens of a text the model reads")
    """Tokens (word pieces for ``bert``) of a text the model reads; the rest is cut (DeLFT's ``maxlen``)."""
    word_dim: int = option(100, "learned word embedding size without --embeddings")
    """Size of the learned word embeddings, used only without pre-trained vectors."""
    transformer: str | None = option(None, "bert: local Hugging Face model directory or transformers-registry name")
    """``bert``: local Hugging Face model directory or transformers-registry name."""
    fold_count: int = option(1, "train an ensemble of N models by N-fold cross-validation")
    """Members of the ensemble: 1, or N for N-fold cross-validation."""

    def __post_init__(self) -> None:
        get_cls_architecture(self.architecture)
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"--dropout must be in [0, 1), got {self.dropout}")
        for name in ("hidden", "dense_size", "max_length", "word_dim", "fold_count"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class ClsDataConfig:
    """How the files are read and what feeds the model."""

    format: str | None = option(None, "input format (default: from the file name)", choices=CLS_FORMATS)
    """csv, tsv, jsonl, citation-sentiment or licenses; None: from the file name."""
    text_column: str | None = option(None, "column (name or 0-based index) or JSON field of the text (default: text)")
    label_columns: tuple[str, ...] = option(
        (), "label column; repeat for multi-label 0/1 columns (default: label; licenses: license)",
        flag="--label-column", action="append", metavar="COLUMN")
    header: bool = option(True, "CSV/TSV files have no header row (columns are then 0-based indices)",
                          flag="--no-header", action="store_false")
    embeddings: str = option(
        "none", "registry name, path to a GloVe/word2vec/fastText file, or none (learned word embeddings)")
    class_weights: str | None = option(
        None, "loss weights per class (default: balanced for single-label, none for multi-label)",
        metavar="balanced|none|C=W,...")
    """``balanced``, ``none`` or ``C=W,...``; None: balanced for single-label, none for multi-label."""


def saved_configs(config: dict) -> tuple[ClsModelConfig, ClsDataConfig]:
    """The model and data configs of a saved ``config.json`` (see :func:`textorch.train.config.from_dict`)."""
    return from_dict(ClsModelConfig, config["model"]), from_dict(ClsDataConfig, config["data"])  # type: ignore[return-value]
