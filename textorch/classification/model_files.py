"""A text classifier's model directory: what ``TextClassifier.save`` writes and ``load`` reads.

Apart from the class, as :mod:`textorch.tagging.model_files` is for taggers: the layout of
``config.json`` (configs, classes, thresholds, word vectors, transformer) is written and read
in one module, and the class only turns the parts into a classifier.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from textorch.classification.config import TASK, TRANSFORMER_BUILDER, ClsDataConfig, ClsModelConfig, saved_configs
from textorch.classification.network import recurrent_member
from textorch.data.cls_batching import PieceEncoder, WordEncoder
from textorch.data.vocab import Vocabulary
from textorch.data.word_table import WordTable
from textorch.model_dir import load_checked, load_weights, read_from_config, save_model_dir
from textorch.models.classifiers import (
    CLS_BUILDERS,
    ClassifierEnsemble,
    build_transformer_classifier_v1,
    get_cls_architecture,
)
from textorch.train.history import TrainingHistory, history_files


@dataclass
class ClassifierParts:
    """A classifier's parts, as ``TextClassifier.save`` gives them and as its constructor and
    thresholds take them back: the model directory is written and read without the class."""

    model_config: ClsModelConfig
    data_config: ClsDataConfig
    classes: list[str]
    multi_label: bool
    network: ClassifierEnsemble
    text_encoder: WordEncoder | PieceEncoder
    embeddings: object | None
    transformer_parts: object | None
    thresholds: np.ndarray
    member_thresholds: np.ndarray
    history: TrainingHistory | None = None
    """What training recorded (written as history.json and beside it); never read back here."""


def write_classifier_dir(directory: str | Path, classifier: ClassifierParts, training_run: dict | None = None) -> Path:
    """Write the model directory atomically; ``training_run`` (see :mod:`textorch.train.resume`)
    lets ``--resume`` recognise a finished run."""
    arch = get_cls_architecture(classifier.model_config.architecture)
    embeddings, parts = classifier.embeddings, classifier.transformer_parts
    config = {
        "task": TASK,
        "builder": arch.builder,
        "model": asdict(classifier.model_config),
        "data": asdict(classifier.data_config),
        "multi_label": classifier.multi_label,
        "thresholds": classifier.thresholds.tolist(),
        "member_thresholds": classifier.member_thresholds.tolist(),
        "embeddings": embeddings.describe() if embeddings is not None else None,  # type: ignore[attr-defined]
        "transformer": parts.describe() if parts is not None else None,  # type: ignore[attr-defined]
    }
    encoder = classifier.text_encoder
    vocab = encoder.vocab if isinstance(encoder, WordEncoder) else None
    words = {"classes": classifier.classes, "words": vocab.to_json() if vocab is not None else None}
    extra = parts.files() if parts is not None else None  # type: ignore[attr-defined]
    extra = {**(extra or {}), **history_files(classifier.history)}
    if training_run is not None:
        config["training_run"] = training_run
    return save_model_dir(directory, config, words, classifier.network.state_dict(), extra)


def read_classifier_dir(directory: str | Path, embeddings: object | None = None,
                        cache_dir: str | Path | None = None) -> ClassifierParts:
    """Rebuild from ``config.json`` with the builder it names, then load the weights; word vectors
    are re-opened and checked (``embeddings``: vectors already open to use instead)."""
    from textorch.embeddings.for_models import reopen_saved

    saved = load_checked(directory, TASK, CLS_BUILDERS)
    config, vocab_json = saved.config, saved.vocab
    with read_from_config(directory):
        model_config, data_config = saved_configs(config)
    classes, multi = list(vocab_json["classes"]), bool(config["multi_label"])
    embeddings, parts = reopen_saved(config.get("embeddings"), embeddings, cache_dir), None
    if saved.builder == TRANSFORMER_BUILDER:
        from textorch.models.transformer_source import load_saved

        members = []
        for _ in range(model_config.fold_count):
            parts, encoder = load_saved(directory)
            members.append(build_transformer_classifier_v1(encoder, len(classes), model_config.dropout))
        text_encoder: WordEncoder | PieceEncoder = PieceEncoder(parts.tokenizer, min(model_config.max_length, parts.window))
    else:
        vocab = Vocabulary.from_json(vocab_json["words"]) if vocab_json.get("words") else None
        text_encoder = WordEncoder(model_config.max_length, vocab=vocab, word_table=None if vocab else WordTable(embeddings))
        members = [recurrent_member(model_config, len(classes), vocab, embeddings) for _ in range(model_config.fold_count)]
    network = ClassifierEnsemble(members, multi)
    load_weights(network, saved.state, directory)
    return ClassifierParts(model_config, data_config, classes, multi, network, text_encoder, embeddings, parts,
                           np.asarray(config["thresholds"], dtype=np.float64),
                           np.asarray(config["member_thresholds"], dtype=np.float64))
