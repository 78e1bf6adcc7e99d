"""Configuration of a text classifier and its data; every default lives here.

The ``cls`` commands build their options from these fields and the resolved values are written
into the model directory's ``config.json``; :func:`saved_configs` reads them back. Optimisation
(``TrainConfig``) is shared with tagging and lives in ``textorch.train.config``.
"""

from __future__ import annotations

from dataclasses import dataclass

from textorch.errors import ConfigError
from textorch.models.classifiers import get_cls_architecture
from textorch.train.config import from_dict

TASK = "text_classification"
"""The ``task`` a classifier's model directory names."""
TRANSFORMER_BUILDER = "transformer_classifier.v1"
"""The builder of the ``bert`` architecture, whose members share a pre-trained encoder's layout."""


@dataclass(frozen=True)
class ClsModelConfig:
    """Network shape; defaults are DeLFT's for its classification models."""

    architecture: str = "gru"
    hidden: int = 64
    """Recurrent units per direction, and convolution filters (DeLFT's ``recurrent_units``)."""
    dense_size: int = 32
    dropout: float = 0.3
    max_length: int = 300
    """Tokens (word pieces for ``bert``) of a text the model reads; the rest is cut (DeLFT's ``maxlen``)."""
    word_dim: int = 100
    """Size of the learned word embeddings, used only without pre-trained vectors."""
    transformer: str | None = None
    """``bert``: local Hugging Face model directory or transformers-registry name."""
    fold_count: int = 1
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

    format: str | None = None
    """csv, tsv, jsonl, citation-sentiment or licenses; None: from the file name."""
    text_column: str | None = None
    label_columns: tuple[str, ...] = ()
    header: bool = True
    embeddings: str = "none"
    class_weights: str | None = None
    """``balanced``, ``none`` or ``C=W,...``; None: balanced for single-label, none for multi-label."""


def saved_configs(config: dict) -> tuple[ClsModelConfig, ClsDataConfig]:
    """The model and data configs of a saved ``config.json`` (see :func:`textorch.train.config.from_dict`)."""
    return from_dict(ClsModelConfig, config["model"]), from_dict(ClsDataConfig, config["data"])  # type: ignore[return-value]
