"""DeLFT's ``Sequence(...)`` keyword arguments as textorch configurations.

Every argument DeLFT 1.2.0's constructor takes is accepted. Those that only concern how DeLFT
runs (workers, logging, checkpoints kept) have no textorch counterpart and change no result.
Those textorch cannot honour are refused by name when given a value other than DeLFT's
default, so that a run never silently differs from what was asked. One exception, said in a
warning: ``recurrent_dropout``, which GROBID's in-process training always passes, while textorch's
recurrent layers (like DeLFT's own PyTorch ones on cuDNN) have no recurrent dropout.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from textorch.data.features import DELFT_FEATURES_VOCABULARY_SIZE
from textorch.errors import ConfigError
from textorch.models.architecture_table import get_architecture
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.delft.embeddings import resolve_embeddings_name
from textorch.tagging.presets import DELFT_LR_DECAY

logger = logging.getLogger(__name__)

DEFAULT_ARCHITECTURE = "BidLSTM_CRF"
_REFUSED_UNLESS = {"optimizer": "adam", "fold_number": 1, "report_to_wandb": False,
                   "use_ELMo": False, "use_BERT": False, "features_lstm_units": 4, "multi_gpu": False}
"""Arguments textorch cannot honour, with the one value it can (DeLFT's default)."""
_NO_EFFECT = ("max_checkpoints_to_keep", "log_dir", "multiprocessing", "num_workers", "nb_workers")
"""Arguments about how DeLFT runs, not what it computes: accepted and not used."""


@dataclass
class DelftModelConfig:
    """The ``model_config`` attributes of a DeLFT ``Sequence`` that GROBID reads or sets.

    ``max_sequence_length`` and ``batch_size`` are read by every ``tag`` call: GROBID sets them
    after ``load`` for its runtime. The others describe the model and are informative once it
    is trained or loaded.
    """

    model_name: str
    architecture: str = DEFAULT_ARCHITECTURE
    embeddings_name: str | None = None
    max_sequence_length: int = 300
    batch_size: int = 20
    features_indices: list[int] | None = None
    features_vocabulary_size: int = DELFT_FEATURES_VOCABULARY_SIZE
    transformer_name: str | None = None
    char_emb_size: int = 25
    max_char_length: int = 30
    char_lstm_units: int = 25
    word_lstm_units: int = 100
    dropout: float = 0.5
    recurrent_dropout: float = 0.25
    fold_number: int = 1
    training: dict = field(default_factory=dict)
    """The optimisation arguments (``max_epoch``, ``patience``...) for ``train``."""

    def __setattr__(self, name: str, value: object) -> None:
        # GROBID sets these after load() and every tag() reads them: a value that is not a
        # number is refused where it is set (the constructor, tag(batch_size=...), an
        # assignment), not at the next tag() call as int()'s ValueError.
        if name in _WHOLE_NUMBERS and value is not None:
            try:
                int(value)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                raise ConfigError(f"{name}={value!r}: expected a whole number (model_config.{name})") from None
        object.__setattr__(self, name, value)


_WHOLE_NUMBERS = ("batch_size", "max_sequence_length")


def model_config_from(model_name: str | None, architecture: str | None, options: dict) -> DelftModelConfig:
    """A ``DelftModelConfig`` from the constructor's arguments; unknown ones are a TypeError, as in DeLFT."""
    options = dict(options)
    legacy_type = options.pop("model_type", None)
    architecture = architecture or legacy_type or DEFAULT_ARCHITECTURE
    get_architecture(architecture)  # an unknown name fails now, with the list of known ones
    transformer = options.pop("transformer_name", None) or options.pop("transformer", None)
    options.pop("transformer", None)
    for name, allowed in _REFUSED_UNLESS.items():
        if name in options and options.pop(name) != allowed:
            raise ConfigError(f"Sequence({name}=...): not available in textorch (only {name}={allowed!r})")
    for name in _NO_EFFECT:
        options.pop(name, None)
    options.pop("resource_registry_path", None)
    training_names = ("learning_rate", "lr_decay", "clip_gradients", "max_epoch", "early_stop", "patience", "seed",
                      "features_embedding_size")
    training = {name: options.pop(name) for name in training_names if name in options}
    indices = options.pop("features_indices", None)
    config = DelftModelConfig(model_name or architecture, architecture, transformer_name=transformer,
                              features_indices=list(indices) if indices else None, training=training)
    for name, value in options.items():
        if name == "model_name" or not hasattr(config, name):
            raise TypeError(f"Sequence() got an unexpected keyword argument {name!r}")
        setattr(config, name, value)
    return config


def feature_spec(indices: list[int] | None) -> str | None:
    """DeLFT's ``features_indices`` in ``--feature-columns`` spelling (``"9,10,11"``)."""
    return ",".join(str(int(i)) for i in indices) if indices else None


def textorch_configs(config: DelftModelConfig, registry: str | None) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    """The configurations ``Sequence.train`` trains with."""
    if config.recurrent_dropout:
        logger.warning("recurrent_dropout=%s is not applied: textorch's recurrent layers have no recurrent "
                       "dropout (docs/grobid.md)", config.recurrent_dropout)
    training = config.training
    architecture = get_architecture(config.architecture)
    model = ModelConfig(
        architecture=config.architecture, char_dim=config.char_emb_size, char_hidden=config.char_lstm_units,
        word_hidden=config.word_lstm_units, dropout=config.dropout, max_char_length=config.max_char_length,
        transformer=config.transformer_name, feature_dim=training.get("features_embedding_size", ModelConfig.feature_dim),
    )
    rate = training.get("learning_rate")
    rates = {} if rate is None else (
        {"transformer_learning_rate": rate} if architecture.uses_transformer else {"learning_rate": rate})
    train = TrainConfig(
        batch_size=config.batch_size, max_epoch=training.get("max_epoch", 50), patience=training.get("patience", 5),
        early_stop=bool(training.get("early_stop", True)), clip_grad=training.get("clip_gradients", 5.0),
        # DeLFT's rate cut on a validation plateau and its batches drawn at random (no length buckets)
        lr_decay=training.get("lr_decay", DELFT_LR_DECAY), bucket_batches=1,
        max_sequence_length=max(config.max_sequence_length, 0), seed=training.get("seed", TrainConfig.seed), **rates,
    )
    # DeLFT's BERT architectures take no word vectors whatever embeddings_name says; neither do textorch's
    embeddings = None if architecture.uses_transformer else config.embeddings_name
    data = DataConfig(
        format="grobid", embeddings=resolve_embeddings_name(embeddings, registry),
        feature_columns=feature_spec(config.features_indices) if architecture.features else None,
        feature_vocabulary_size=config.features_vocabulary_size,
    )
    return model, train, data
