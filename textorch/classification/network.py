"""The networks of a text classifier's ensemble and its text encoder, built from the config.

One call per member kind serves training (:meth:`TextClassifier.build`, through
:func:`new_members`) and loading (:mod:`textorch.classification.model_files`), so a member made
either way has the same layers and loads the same weights.
"""

from __future__ import annotations

import torch
from torch import nn

from textorch.classification.config import TRANSFORMER_BUILDER, ClsModelConfig
from textorch.data.cls_batching import PieceEncoder, WordEncoder
from textorch.data.cls_readers import ClsCorpus
from textorch.data.vocab import Vocabulary
from textorch.data.word_table import WordTable
from textorch.errors import ConfigError
from textorch.models.classifiers import build_text_classifier_v1, build_transformer_classifier_v1, get_cls_architecture


def new_members(
    train: ClsCorpus, model_config: ClsModelConfig, n_classes: int, embeddings: object | None, seed: int,
) -> tuple[list[nn.Module], WordEncoder | PieceEncoder, object | None]:
    """``fold_count`` untrained members (member i initialised from ``seed + i``), the text
    encoder they read (its vocabulary fitted on ``train`` without word vectors), and the
    pre-trained encoder's parts of a ``bert`` ensemble (None otherwise)."""
    arch = get_cls_architecture(model_config.architecture)
    members, parts = [], None
    if arch.builder == TRANSFORMER_BUILDER:
        from textorch.models.transformer_source import open_pretrained

        if not model_config.transformer:
            raise ConfigError("--architecture bert needs --transformer DIR (a local Hugging Face model directory)")
        for i in range(model_config.fold_count):
            torch.manual_seed(seed + i)
            parts, encoder = open_pretrained(model_config.transformer)
            members.append(build_transformer_classifier_v1(encoder, n_classes, model_config.dropout))
        text_encoder: WordEncoder | PieceEncoder = PieceEncoder(parts.tokenizer, min(model_config.max_length, parts.window))
    else:
        if model_config.transformer:
            raise ConfigError(f"--transformer is for the bert architecture, not {arch.name!r}")
        if embeddings is not None:
            text_encoder = WordEncoder(model_config.max_length, word_table=WordTable(embeddings))
        else:
            text_encoder = WordEncoder(model_config.max_length, vocab=WordEncoder.fit_vocab([e.text for e in train.examples], model_config.max_length))
        for i in range(model_config.fold_count):
            torch.manual_seed(seed + i)
            members.append(recurrent_member(model_config, n_classes, text_encoder.vocab, embeddings))
    return members, text_encoder, parts


def recurrent_member(model_config: ClsModelConfig, n_classes: int, vocab: Vocabulary | None, embeddings: object | None) -> nn.Module:
    """One network of the recurrent/convolutional family: the same call at training and at loading."""
    return build_text_classifier_v1(
        model_config.architecture, n_classes,
        word_dim=embeddings.dim if embeddings is not None else model_config.word_dim,  # type: ignore[attr-defined]
        vocab_size=len(vocab) if vocab is not None else 0,
        hidden=model_config.hidden, dense_size=model_config.dense_size, dropout=model_config.dropout,
    )
