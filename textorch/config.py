"""Configuration of a sequence-labelling run, split by concern; every default lives here.

The CLI builds its options from these fields, and the resolved values are written into the
model directory's ``config.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from textorch.errors import ConfigError


@dataclass(frozen=True)
class ModelConfig:
    """Network shape. Defaults are DeLFT's for the BiLSTM family."""

    architecture: str = "BidLSTM_CRF"
    char_dim: int = 25
    """Character embedding size."""
    char_hidden: int = 25
    """Character BiLSTM units per direction (the char CNN uses twice this many filters)."""
    word_hidden: int = 100
    """Word-level BiLSTM/BiGRU units per direction."""
    feature_dim: int = 4
    """Embedding size of each categorical feature column."""
    feature_output_dim: int = 32
    """Size of the projected feature channel."""
    dropout: float = 0.5
    max_char_length: int = 30
    """Characters of a token seen by the character encoder."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        for name in ("char_dim", "char_hidden", "word_hidden", "feature_dim", "feature_output_dim", "max_char_length"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and data splitting."""

    batch_size: int = 32
    """Global batch size: the same meaning whatever the number of devices."""
    learning_rate: float = 0.001
    max_epoch: int = 50
    patience: int = 5
    """Epochs without improvement of validation F1 before stopping."""
    early_stop: bool = True
    clip_grad: float = 5.0
    """Maximum gradient norm (0 disables clipping)."""
    max_sequence_length: int = 0
    """Longer training sequences are cut into pieces of this many tokens (0: no limit)."""
    seed: int = 42
    valid_fraction: float = 0.1
    """Share of the training data held out for early stopping when no --valid file is given."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.learning_rate <= 0:
            raise ConfigError(f"--learning-rate must be > 0, got {self.learning_rate}")
        if self.max_epoch < 1:
            raise ConfigError(f"--max-epoch must be >= 1, got {self.max_epoch}")
        if self.patience < 1:
            raise ConfigError(f"--patience must be >= 1, got {self.patience}")
        if self.max_sequence_length < 0:
            raise ConfigError(f"--max-sequence-length must be >= 0, got {self.max_sequence_length}")
        if not 0.0 < self.valid_fraction < 1.0:
            raise ConfigError(f"valid_fraction must be in (0, 1), got {self.valid_fraction}")


@dataclass(frozen=True)
class DataConfig:
    """How the input is read and which external resources feed the model."""

    format: str | None = None
    """``conll`` or ``grobid``; None detects it from the file."""
    embeddings: str = "none"
    """Registry name, path of a GloVe/word2vec/fastText file, or ``none``."""
    feature_columns: str | None = None
    """GROBID feature columns for the feature channel, e.g. ``9-15``; None chooses from the data."""


def to_dict(config: object) -> dict:
    return asdict(config)  # type: ignore[call-overload]


def from_dict(cls: type, data: dict) -> object:
    """Rebuild a config, ignoring keys a newer release might add and keeping defaults for missing ones."""
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})
