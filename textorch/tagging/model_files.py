"""A tagger's model directory composed from its parts, in one place for every writer and the reader.

``SequenceLabeler.save`` writes its parts through here, and so does the DeLFT importer, which
builds a tagger's parts without the ``SequenceLabeler`` class (``SequenceLabeler.load`` converts
a DeLFT directory through the importer). ``SequenceLabeler.load`` reads the parts back with
:func:`read_tagger_dir`. Parts, not the class: the class reads and writes through this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from textorch.data.encoding import SequenceEncoder
from textorch.model_dir import check_labels_fit, load_checked, load_weights, read_from_config, save_model_dir
from textorch.models.architecture_table import get_architecture
from textorch.models.architectures import BUILDERS
from textorch.models.transformer_source import TransformerParts, load_saved
from textorch.tagging.config import TASK, DataConfig, ModelConfig, saved_configs, to_dict
from textorch.tagging.network import build_network, untied
from textorch.tagging.template_choice import load_table
from textorch.train.history import TrainingHistory, history_files

DELFT_SOURCE_FILE = "delft-source.json"
"""In a model imported from DeLFT: DeLFT's own ``config`` and ``preprocessor`` (its names, label
strings and ids), which an export in DeLFT's layout writes back as DeLFT wrote them."""


@dataclass
class TaggerParts:
    """What a tagger's model directory holds: a ``SequenceLabeler``'s attributes, as ``save``
    gives them, as the DeLFT importer builds them, as :func:`read_tagger_dir` reads them back."""

    encoder: SequenceEncoder
    model: torch.nn.Module
    model_config: ModelConfig
    data_config: DataConfig
    embeddings: object | None = None
    input_format: str = "conll"
    n_features: int = 0
    transformer: TransformerParts | None = None
    history: TrainingHistory | None = None
    delft_source: dict | None = None
    """The imported DeLFT model's ``config.json`` and ``preprocessor.json``, kept as they were."""


def write_tagger_dir(directory: str | Path, tagger: TaggerParts, training_run: dict | None = None) -> Path:
    """Write the model directory atomically; ``training_run`` (the checksum of the options and
    data that made it, see :mod:`textorch.train.resume`) lets ``--resume`` recognise a finished run."""
    config = {
        "task": TASK,
        "builder": tagger.model_config.builder(),
        "model": to_dict(tagger.model_config),
        "data": {**to_dict(tagger.data_config), "input_format": tagger.input_format, "n_features": tagger.n_features},
        "embeddings": tagger.embeddings.describe() if tagger.embeddings is not None else None,  # type: ignore[attr-defined]
    }
    extra_files: dict = {}
    if tagger.transformer is not None:
        config["transformer"] = tagger.transformer.describe()
        extra_files = dict(tagger.transformer.files())
    if training_run is not None:
        config["training_run"] = training_run
    if tagger.delft_source is not None:
        extra_files[DELFT_SOURCE_FILE] = json.dumps(tagger.delft_source, indent=1, ensure_ascii=False) + "\n"
    state = untied(tagger.model.state_dict())
    return save_model_dir(directory, config, tagger.encoder.to_json(), state, {**extra_files, **history_files(tagger.history)})


def read_tagger_dir(directory: str | Path, embeddings: object | None = None,
                    cache_dir: str | Path | None = None) -> TaggerParts:
    """A saved tagger's parts: configs, vocabularies, the network with its weights, and its word
    vectors re-opened and checked (``embeddings``: vectors already open to use instead)."""
    from textorch.embeddings.for_models import reopen_saved

    saved = load_checked(directory, TASK, BUILDERS, default_builder="rnn_tagger.v1")
    with read_from_config(directory):
        model_config, data_config, input_format, n_features = saved_configs(saved.config, saved.builder)
        uses_transformer = get_architecture(model_config.architecture).uses_transformer
    described = saved.config.get("embeddings")
    embeddings = reopen_saved(described, embeddings, cache_dir)
    encoder = SequenceEncoder.from_json(saved.vocab)
    check_labels_fit(directory, len(encoder.labels.items), saved.state)
    transformer, shell = None, None
    if uses_transformer:
        transformer, shell = load_saved(directory, model_config.transformer_window, model_config.transformer_stride)
    model = build_network(model_config, encoder, int(described["dim"]) if described else 0, transformer, shell)
    load_weights(model, saved.state, directory)
    load_table(encoder, model)
    return TaggerParts(encoder, model, model_config, data_config, embeddings, input_format, n_features, transformer)
