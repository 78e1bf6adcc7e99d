"""``SequenceLabeler``: the one object behind training, evaluation, tagging and saving.

The CLI (and later the HTTP server) are thin adapters over this class, so there is a single
inference path.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from textorch.config import DataConfig, ModelConfig, TrainConfig, from_dict, to_dict
from textorch.data.batching import Batch, collate, sorted_batches
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.encoding import EncodedSequence, SequenceEncoder
from textorch.data.features import parse_columns, select_feature_columns
from textorch.data.splits import cut_long_sequences
from textorch.data.word_table import WordTable
from textorch.errors import ConfigError, ModelFormatError
from textorch.eval.metrics import EntityCounts
from textorch.models.architectures import build_rnn_tagger_v1, get_architecture
from textorch.model_dir import load_model_dir, save_model_dir
from textorch.train.dist import DistContext
from textorch.train.trainer import Trainer, TrainingResult

logger = logging.getLogger(__name__)

TASK = "sequence_labelling"


@dataclass
class EncodedData:
    """Encoded sequences plus the word vectors they index: what the trainer batches from."""

    encoded: list[EncodedSequence]
    word_table: WordTable | None

    def lengths(self) -> list[int]:
        return [len(e) for e in self.encoded]

    def batch(self, indices: list[int]) -> Batch:
        return collate(self.encoded, indices, self.word_table)


@dataclass
class Prediction:
    """Labels (IOB2) and per-token confidence for one sequence."""

    labels: list[str]
    scores: list[float]


class SequenceLabeler:
    """A trained tagger: vocabularies, network and the word vectors it was trained with."""

    def __init__(
        self,
        encoder: SequenceEncoder,
        model: torch.nn.Module,
        model_config: ModelConfig,
        data_config: DataConfig,
        embeddings: object | None = None,
        input_format: str = "conll",
        n_features: int = 0,
        device: torch.device | str = "cpu",
    ) -> None:
        self.encoder = encoder
        self.model = model
        self.model_config = model_config
        self.data_config = data_config
        self.embeddings = embeddings
        self.input_format = input_format
        self.n_features = n_features
        self.device = torch.device(device)
        self.model.to(self.device)
        self.word_table = WordTable(embeddings) if embeddings is not None else None
        self.training_result: TrainingResult | None = None

    # ----------------------------------------------------------------- building
    @classmethod
    def build(
        cls,
        train: Corpus,
        model_config: ModelConfig,
        data_config: DataConfig,
        embeddings: object | None = None,
        device: torch.device | str = "cpu",
        seed: int = 42,
    ) -> "SequenceLabeler":
        """Fit vocabularies on ``train`` and create an untrained network for them."""
        architecture = get_architecture(model_config.architecture)
        if train.n_features and data_config.feature_columns:
            columns = parse_columns(data_config.feature_columns, train.n_features)
        elif architecture.features:
            columns = select_feature_columns(train.sequences, train.n_features)
        else:
            columns = []
        encoder = SequenceEncoder.fit(train.sequences, columns, model_config.max_char_length)
        torch.manual_seed(seed)
        model = _build_network(model_config, encoder, embeddings.dim if embeddings is not None else 0)
        return cls(encoder, model, model_config, data_config, embeddings, train.format, train.n_features, device)

    def fit(
        self,
        train: Corpus,
        valid: Corpus | None,
        train_config: TrainConfig,
        ctx: DistContext | None = None,
    ) -> TrainingResult:
        """Train in place; keeps the weights of the best validation epoch."""
        ctx = ctx or DistContext()
        sequences = cut_long_sequences(train.sequences, train_config.max_sequence_length)
        data = self.encode(sequences, with_labels=True)
        validate = None
        if valid is not None and train_config.early_stop:
            valid_data = self.encode(valid.sequences, with_labels=True)

            def validate(model: torch.nn.Module) -> float:
                counts = self.count_entities(valid.sequences, valid_data, batch_size=max(train_config.batch_size, 64))
                return counts.scores()["f1"]

        torch.manual_seed(train_config.seed)
        trainer = Trainer(self.model, train_config, self.device, ctx, validate)
        self.training_result = trainer.fit(data)
        self.model.eval()
        return self.training_result

    # ----------------------------------------------------------------- inference
    def encode(self, sequences: list[TokenSequence], with_labels: bool = False) -> EncodedData:
        encoded = [self.encoder.encode(s, with_labels=with_labels) for s in sequences]
        if self.word_table is not None:
            for item, sequence in zip(encoded, sequences):
                item.word_ids = self.word_table.index(sequence.tokens)
        return EncodedData(encoded, self.word_table)

    @torch.inference_mode()
    def _decode(self, data: EncodedData, batch_size: int) -> list[Prediction]:
        self.model.eval()
        lengths = data.lengths()
        results: list[Prediction | None] = [None] * len(lengths)
        nonempty = [i for i, n in enumerate(lengths) if n > 0]
        for i, n in enumerate(lengths):
            if n == 0:
                results[i] = Prediction([], [])
        label_items = self.encoder.labels.items
        for chunk in sorted_batches([lengths[i] for i in nonempty], batch_size):
            indices = [nonempty[j] for j in chunk]
            batch = data.batch(indices).to(self.device)
            paths, scores = self.model.decode(batch)
            paths_np = paths.cpu().numpy()
            scores_np = scores.float().cpu().numpy()
            for row, index in enumerate(indices):
                n = lengths[index]
                results[index] = Prediction(
                    [label_items[k] for k in paths_np[row, :n]], scores_np[row, :n].tolist()
                )
        return results  # type: ignore[return-value]

    def predict(self, sequences: list[TokenSequence], batch_size: int = 32) -> list[Prediction]:
        """Labels for each sequence, in input order; no token is ever dropped."""
        return self._decode(self.encode(sequences), batch_size)

    def count_entities(
        self, sequences: list[TokenSequence], data: EncodedData | None = None, batch_size: int = 64
    ) -> EntityCounts:
        data = data or self.encode(sequences)
        predictions = self._decode(data, batch_size)
        counts = EntityCounts()
        gold = [s.labels or ["O"] * len(s) for s in sequences]
        counts.update(gold, [p.labels for p in predictions])
        return counts

    def evaluate(self, corpus: Corpus, batch_size: int = 64) -> dict:
        """Entity-level scores (micro and per label) of this model on a labelled corpus."""
        missing = [s.line for s in corpus.sequences if s.labels is None]
        if missing:
            raise ConfigError(f"{corpus.path}: evaluation needs labelled data (no labels at line {missing[0]})")
        return self.count_entities(corpus.sequences, batch_size=batch_size).scores()

    # ----------------------------------------------------------------- persistence
    def save(self, directory: str | Path) -> Path:
        config = {
            "task": TASK,
            "builder": get_architecture(self.model_config.architecture).builder,
            "model": to_dict(self.model_config),
            "data": {**to_dict(self.data_config), "input_format": self.input_format, "n_features": self.n_features},
            "embeddings": self.embeddings.describe() if self.embeddings is not None else None,
        }
        state = {k: v for k, v in self.model.state_dict().items()}
        return save_model_dir(directory, config, self.encoder.to_json(), state)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        device: torch.device | str = "cpu",
        embeddings: object | None = None,
        cache_dir: str | Path | None = None,
    ) -> "SequenceLabeler":
        """Rebuild from ``config.json`` then load the weights; embeddings are re-opened and checked."""
        config, vocab, state = load_model_dir(directory)
        if config.get("task") != TASK:
            raise ModelFormatError(f"{directory}: a {config.get('task')!r} model, not a sequence labelling model")
        model_config = from_dict(ModelConfig, config["model"])
        data_section = dict(config["data"])
        input_format = data_section.pop("input_format", "conll")
        n_features = int(data_section.pop("n_features", 0))
        data_config = from_dict(DataConfig, data_section)
        described = config.get("embeddings")
        if described is not None and embeddings is None:
            from textorch.embeddings import open_embeddings

            embeddings = open_embeddings(described["path"], cache_dir=cache_dir)
        if described is not None:
            embeddings.check_matches(described)
        encoder = SequenceEncoder.from_json(vocab)
        model = _build_network(model_config, encoder, int(described["dim"]) if described else 0)
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            raise ModelFormatError(f"{directory}/model.safetensors: weights do not fit the config ({exc})") from None
        model.eval()
        return cls(encoder, model, model_config, data_config, embeddings, input_format, n_features, device)

    @property
    def label_names(self) -> list[str]:
        return sorted({lab[2:] for lab in self.encoder.labels.items if lab != "O"})


def _build_network(model_config: ModelConfig, encoder: SequenceEncoder, word_dim: int) -> torch.nn.Module:
    """The network for a config and fitted vocabularies: the same call at training and loading."""
    return build_rnn_tagger_v1(
        get_architecture(model_config.architecture),
        n_chars=len(encoder.chars),
        n_labels=len(encoder.labels),
        feature_vocab_sizes=[len(v) for v in encoder.features],
        word_dim=word_dim,
        char_dim=model_config.char_dim,
        char_hidden=model_config.char_hidden,
        word_hidden=model_config.word_hidden,
        feature_dim=model_config.feature_dim,
        feature_output_dim=model_config.feature_output_dim,
        dropout=model_config.dropout,
    )
