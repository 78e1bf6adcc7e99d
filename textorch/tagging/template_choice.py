"""Which CRF++ template a ``_TEMPLATE`` tagger reads, and keeping its fitted table with the weights."""

from __future__ import annotations

import numpy as np
import torch

from textorch.data.corpus import Corpus
from textorch.data.crf_template import FeatureTemplate, check_columns, generated_template, read_template
from textorch.data.encoding import SequenceEncoder
from textorch.data.template_features import column_value_counts
from textorch.models.architecture_table import get_architecture
from textorch.tagging.config import ModelConfig


def templates_for(train: Corpus, model_config: ModelConfig) -> list[FeatureTemplate] | None:
    """The template of ``model_config.crf_template``, else one generated from ``train``'s columns;
    None for an architecture without template features."""
    if not get_architecture(model_config.architecture).template:
        return None
    n_columns = train.n_features + 1
    if model_config.crf_template:
        templates = read_template(model_config.crf_template)
        check_columns(templates, n_columns, model_config.crf_template)
        return templates
    return generated_template(column_value_counts(train.sequences, n_columns))


def store_table(encoder: SequenceEncoder, model: torch.nn.Module) -> None:
    """Copy the fitted feature table into the network, which saves it with its weights."""
    part = getattr(model, "template_emissions", None)
    if encoder.templates is not None and part is not None:
        part.set_keys(torch.from_numpy(encoder.templates.table.view(np.int64)))


def load_table(encoder: SequenceEncoder, model: torch.nn.Module) -> None:
    """Give the encoder the feature table that the loaded weights carry."""
    part = getattr(model, "template_emissions", None)
    if encoder.templates is not None and part is not None:
        encoder.templates.use_table(part.keys.numpy().view(np.uint64))
