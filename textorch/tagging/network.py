"""The network of a sequence labeller, built from its config and fitted vocabularies.

One builder call serves training (:meth:`SequenceLabeler.build`, through :func:`new_network`),
loading (:meth:`SequenceLabeler.load`) and incremental growth (:mod:`textorch.tagging.incremental`),
so a network made any of these ways has the same layers and loads the same weights.
"""

from __future__ import annotations

import torch

from textorch.data.corpus import Corpus
from textorch.data.encoding import SequenceEncoder
from textorch.data.features import parse_columns, select_feature_columns
from textorch.data.tags import iob2_forbidden
from textorch.errors import ConfigError
from textorch.models.architecture_table import Architecture, get_architecture
from textorch.models.architectures import build_rnn_tagger_v1, build_transformer_tagger_v1
from textorch.models.cpu_decoder import preload as preload_compiled_crf
from textorch.models.crf import CRF
from textorch.models.transformer_source import TransformerParts, open_pretrained
from textorch.tagging.config import DataConfig, ModelConfig
from textorch.tagging.template_choice import store_table, templates_for


def new_network(
    train: Corpus, model_config: ModelConfig, data_config: DataConfig, embeddings: object | None, seed: int,
) -> tuple[SequenceEncoder, torch.nn.Module, TransformerParts | None]:
    """Vocabularies fitted on ``train`` (feature columns chosen as the config says) and an
    untrained network for them, initialised from ``seed``; the transformer parts of a BERT model."""
    architecture = get_architecture(model_config.architecture)
    if architecture.features and train.n_features and data_config.feature_columns:
        columns = parse_columns(data_config.feature_columns, train.n_features)
    elif architecture.features:
        columns = select_feature_columns(train.sequences, train.n_features, data_config.feature_vocabulary_size)
    else:
        columns = []
    encoder = SequenceEncoder.fit(train.sequences, columns, model_config.max_char_length,
                                  templates_for(train, model_config))
    torch.manual_seed(seed)
    transformer, pretrained = open_transformer(model_config, architecture, embeddings)
    model = build_network(model_config, encoder, embeddings.dim if embeddings is not None else 0,  # type: ignore[attr-defined]
                          transformer, pretrained)
    store_table(encoder, model)
    return encoder, model, transformer


def build_network(
    model_config: ModelConfig,
    encoder: SequenceEncoder,
    word_dim: int,
    transformer: TransformerParts | None = None,
    transformer_encoder: torch.nn.Module | None = None,
) -> torch.nn.Module:
    """The network for a config and fitted vocabularies: the same call at training and loading.

    Transformer models receive their encoder module ready-made: pre-trained when building,
    an empty shell of the saved architecture when loading.
    """
    architecture = get_architecture(model_config.architecture)
    if architecture.uses_transformer:
        return build_transformer_tagger_v1(
            architecture,
            transformer_encoder,
            hidden_size=transformer.hidden_size,
            n_chars=len(encoder.chars),
            n_labels=len(encoder.labels),
            feature_vocab_sizes=[len(v) for v in encoder.features],
            char_dim=model_config.char_dim,
            char_hidden=model_config.char_hidden,
            feature_dim=model_config.feature_dim,
            feature_output_dim=model_config.feature_output_dim,
            dropout=model_config.transformer_dropout,
            crf_over_subtokens=model_config.transformer_crf == "subtokens",
        )
    model = build_rnn_tagger_v1(
        get_architecture(model_config.architecture),
        n_chars=len(encoder.chars),
        n_labels=len(encoder.labels),
        feature_vocab_sizes=[len(v) for v in encoder.features],
        word_dim=word_dim,
        char_dim=model_config.char_dim,
        char_hidden=model_config.char_hidden,
        word_hidden=model_config.word_hidden,
        dense_hidden=model_config.dense_hidden,
        feature_dim=model_config.feature_dim,
        feature_output_dim=model_config.feature_output_dim,
        dropout=model_config.dropout,
        word_layers=model_config.word_layers,
        casing_dim=model_config.casing_dim,
        char_cnn_filters=model_config.char_cnn_filters,
        char_cnn_padded_to=model_config.max_char_length if model_config.char_cnn_pooling == "padded" else 0,
        feature_encoder=model_config.feature_encoder,
        template_rows=encoder.templates.n_rows if encoder.templates is not None else 0,
        template_dropout=model_config.template_dropout,
    )
    if forbids_iob2_moves(model_config) and hasattr(model.head, "crf"):
        forbidden, at_start = iob2_forbidden(encoder.labels.items)
        model.head.crf.forbid(torch.tensor(forbidden, dtype=torch.bool), torch.tensor(at_start, dtype=torch.bool))
    return model


def forbids_iob2_moves(model_config: ModelConfig) -> bool:
    """Whether a network built for ``model_config`` rules out IOB2's impossible moves
    (:func:`build_network`); its training labels must then be valid IOB2."""
    return get_architecture(model_config.architecture).template and model_config.crf_transitions == "iob2"


def open_transformer(
    model_config: ModelConfig, architecture: Architecture, embeddings: object | None
) -> tuple[TransformerParts | None, torch.nn.Module | None]:
    """The pre-trained encoder a BERT-family architecture needs; options that do not fit are errors."""
    if not architecture.uses_transformer:
        if model_config.transformer:
            raise ConfigError(f"--transformer is used by the BERT architectures only, not {architecture.name}")
        return None, None
    if not model_config.transformer:
        raise ConfigError(f"{architecture.name} needs --transformer (a Hugging Face model directory or registry name)")
    if embeddings is not None:
        raise ConfigError(f"{architecture.name} does not use word embeddings; leave --embeddings at none")
    return open_pretrained(model_config.transformer, model_config.transformer_window, model_config.transformer_stride)


def preload_crf_decoder(model: torch.nn.Module, device: torch.device, has_transformer: bool) -> bool:
    """Load the compiled CRF decoder now (:mod:`textorch.models.cpu_decoder`) if ``model`` would
    use it much: a BiLSTM-CRF family tagger on the CPU (on a GPU the CRF decodes there)."""
    if device.type != "cpu" or has_transformer:
        return False
    if not any(isinstance(m, CRF) for m in model.modules()):
        return False
    return preload_compiled_crf()


def untied(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of tensors sharing storage (tied weights), which safetensors refuses to write."""
    owners: dict[int, int] = {}
    for tensor in state.values():
        pointer = tensor.untyped_storage().data_ptr()
        owners[pointer] = owners.get(pointer, 0) + 1
    return {k: v.clone() if owners[v.untyped_storage().data_ptr()] > 1 else v for k, v in state.items()}
