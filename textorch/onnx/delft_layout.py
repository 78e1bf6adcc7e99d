"""Export a tagger in DeLFT 1.2's ONNX layout, the directory DeLFT's Java runner reads.

DeLFT's ``delft.applications.onnx_export`` writes ``encoder.onnx`` (the network up to the
emissions; inputs ``word_input``, ``char_input`` and, for ``_FEATURES`` models,
``features_input``; no mask: a token is padding when all its character ids are 0),
``crf_params.json``, ``vocab.json`` and ``config.json``. The Java side (DeLFT's
``java/delft-onnx``, and GROBID's proposed ONNX engine) encodes the words itself, runs the
graph, and decodes with Viterbi over ``crf_params.json``: no Python anywhere. This module writes
the same files, names, keys, shapes and dtypes from a textorch model, so that such a program
runs it unchanged; ``docs/onnx.md`` ("DeLFT's layout") lists what the runner does and what
is refused.

For a model imported from DeLFT the values are DeLFT's own (its label strings and their
order, character and feature ids, ``modelName``, ``embeddingsName``), given by the importer's
record (``delft_source``); the graph maps them onto textorch's internal ids, so the file
contents equal DeLFT's export of the same model.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from textorch.errors import ConfigError, ModelFormatError
from textorch.models.heads import CRFHead
from textorch.models.tagger import SequenceTagger
from textorch.onnx.export import ExportableTagger
from textorch.onnx.exporter import write_graph
from textorch.onnx.files import staged_directory

logger = logging.getLogger(__name__)

ENCODER_FILE = "encoder.onnx"
CRF_FILE = "crf_params.json"
VOCAB_FILE = "vocab.json"
CONFIG_FILE = "config.json"
LAYOUT_FILES = (ENCODER_FILE, CRF_FILE, VOCAB_FILE, CONFIG_FILE)
OPSET = 14
"""DeLFT's exporter's opset; kept so that a runtime pinned for DeLFT's files reads ours."""
ARCHITECTURES = ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidLSTM_ChainCRF", "BidLSTM_ChainCRF_FEATURES")
"""What DeLFT's exporter accepts, and so what its runner is written for."""
DEFAULT_MAX_SEQUENCE_LENGTH = 300
"""``maxSequenceLength`` of a textorch-trained model, which has none (it tags a sequence whole):
DeLFT's default, for a program that sizes its padding from ``config.json``."""
PAD_CHAR, UNK_CHAR = "<PAD>", "<UNK>"
"""DeLFT's names of the character ids 0 and 1, which its runner looks up in ``charVocab``."""


@dataclass
class DelftIds:
    """The ids DeLFT's runner sends and what each means to textorch's network."""

    labels: list[str]
    """Column ``k`` of ``emissions``: label index ``k`` of ``tagVocab``/``tagIndex``."""
    label_vocab: dict[str, int]
    label_order: list[int]
    """For each column ``k``, textorch's label index of ``labels[k]``."""
    char_vocab: dict[str, int]
    feature_columns: list[int]
    """``featuresIndices``: the column of each slot of ``features_input``, in slot order."""
    feature_maps: dict[int, dict[str, int]]
    """``featuresMapToIndex``: per column, value -> the id the runner sends (0 when unknown)."""
    feature_tables: list[list[int]]
    """Per textorch feature slot: runner id -> textorch's id of that value in its column."""
    feature_slots: list[int]
    """For each of textorch's feature slots, the slot of ``features_input`` it reads."""


class DelftEncoder(nn.Module):
    """The emissions DeLFT's graph computes, from DeLFT's inputs, with textorch's network.

    As DeLFT 1.2 does: a token is real when one of its character ids is not 0 (the first token
    always), the sequence is the real tokens up to the last one, the BiLSTM reads only those,
    and the dense layers run on every position (zeros past the end, as ``pad_packed_sequence``
    leaves them), so even padded positions give DeLFT's values.
    """

    def __init__(self, tagger: SequenceTagger, ids: DelftIds) -> None:
        super().__init__()
        inner = ExportableTagger(tagger)
        self.parts, self.part_inputs, self.encoder, self.emissions = (
            inner.parts, inner.part_inputs, inner.encoder, inner.emissions)
        self.register_buffer("label_order", torch.tensor(ids.label_order, dtype=torch.long), persistent=False)
        self.with_features = "feature_ids" in inner.input_names
        width = max([len(t) for t in ids.feature_tables] + [1])
        tables = torch.ones((max(len(ids.feature_tables), 1), width), dtype=torch.long)
        for slot, table in enumerate(ids.feature_tables):
            tables[slot, : len(table)] = torch.tensor(table, dtype=torch.long)
        self.register_buffer("feature_tables", tables, persistent=False)
        self.register_buffer("feature_slots", torch.tensor(ids.feature_slots or [0], dtype=torch.long),
                             persistent=False)

    def forward(self, word_input: torch.Tensor, char_input: torch.Tensor,
                features_input: torch.Tensor | None = None) -> torch.Tensor:
        real = (char_input != 0).any(dim=-1)
        real = torch.cat([torch.ones_like(real[:, :1]), real[:, 1:]], dim=1)
        lengths = real.sum(dim=1)
        steps = torch.arange(char_input.shape[1], device=char_input.device).unsqueeze(0)
        mask = (steps < lengths.unsqueeze(1)).long()
        named = {"word_vectors": word_input, "char_ids": char_input, "mask": mask}
        if self.with_features:
            named["feature_ids"] = self._feature_ids(features_input)
        x = torch.cat([part(*(named[n] for n in names)) for part, names in zip(self.parts, self.part_inputs)], dim=-1)
        h = self.encoder(x, lengths) if self.encoder is not None else x
        h = h * mask.unsqueeze(-1).to(h.dtype)
        return self.emissions(h).index_select(-1, self.label_order)

    def _feature_ids(self, features_input: torch.Tensor | None) -> torch.Tensor:
        """textorch's per-column ids of the runner's ids: each slot through its table (an id the
        table does not know, 0 included, is textorch's unknown value)."""
        if features_input is None:
            raise ValueError("this model reads features_input")
        width = self.feature_tables.shape[1]
        ids = features_input.index_select(-1, self.feature_slots).clamp(min=0, max=width - 1)
        offsets = torch.arange(self.feature_tables.shape[0], device=ids.device) * width
        return self.feature_tables.reshape(-1)[ids + offsets]


def _check_model(labeler, architecture: str) -> None:
    """Refuse, in one message, what DeLFT's runner cannot feed or decode as textorch does."""
    if architecture not in ARCHITECTURES:
        raise ConfigError(f"the DeLFT ONNX layout is for the architectures {', '.join(ARCHITECTURES)} (what DeLFT's "
                          f"exporter and Java runner support), not {architecture}; export it with --layout textorch")
    if type(labeler.model) is not SequenceTagger or not isinstance(labeler.model.head, CRFHead):
        raise ConfigError(f"the DeLFT ONNX layout needs a CRF tagger; this {architecture} model has a "
                          f"{type(labeler.model.head).__name__}")
    if labeler.embeddings is None:
        raise ConfigError("this model has no word vectors, but DeLFT's runner always feeds word_input from an "
                          "embeddings database: the DeLFT layout cannot carry it (use --layout textorch)")
    lookup = getattr(labeler.data_config, "word_lookup", "exact_or_lower")
    if lookup != "delft":
        raise ConfigError(
            f"this model finds a token's word vector with textorch's rule {lookup!r} (the token, else its lower "
            "case), while DeLFT's runner replaces digits by 0 and looks up that exact form only, so it would feed "
            "other vectors than the model was trained with and its labels could differ; train with "
            "--word-lookup delft (DeLFT's rule) to export in the DeLFT layout, or use --layout textorch")


def _own_ids(labeler) -> DelftIds:
    """The runner's ids of a textorch-trained model: textorch's own, under DeLFT's key names."""
    encoder = labeler.encoder
    labels = list(encoder.labels.items)
    chars = {PAD_CHAR: 0, UNK_CHAR: 1, **{c: i for i, c in enumerate(encoder.chars.items) if i >= 2}}
    columns = list(encoder.feature_columns)
    maps = {c: {v: i for i, v in enumerate(vocab.items) if i >= 2} for c, vocab in zip(columns, encoder.features)}
    tables = [[1] + list(range(1, len(vocab.items))) for vocab in encoder.features]
    return DelftIds(labels, {label: i for i, label in enumerate(labels)}, list(range(len(labels))), chars,
                    columns, maps, tables, list(range(len(columns))))


def _delft_ids(labeler, preprocessor: dict) -> DelftIds:
    """DeLFT's ids (from the imported model's record of DeLFT's preprocessor), mapped onto textorch's."""
    encoder = labeler.encoder
    tag_vocab = {str(t): int(i) for t, i in preprocessor["vocab_tag"].items()}
    labels = [t for t, _ in sorted(tag_vocab.items(), key=lambda kv: kv[1])]
    if [tag_vocab[t] for t in labels] != list(range(len(labels))):
        raise ModelFormatError("the recorded DeLFT vocab_tag is not numbered 0..n-1")
    index = {label: i for i, label in enumerate(encoder.labels.items)}
    missing = [t for t in labels if t not in index]
    if missing or len(labels) != len(index):
        raise ModelFormatError(f"the recorded DeLFT labels do not match the model's ({missing or 'counts differ'})")
    chars = {str(c): int(i) for c, i in preprocessor["vocab_char"].items()}
    for char, i in chars.items():
        if i >= 2 and encoder.chars.id(char) != i:
            raise ModelFormatError(f"the recorded DeLFT character ids differ from the model's ({char!r})")
    features = preprocessor.get("feature_preprocessor") or {}
    delft_columns = [int(c) for c in features.get("features_indices") or []]
    maps = {int(c): {str(v): int(i) for v, i in m.items()}
            for c, m in (features.get("features_map_to_index") or {}).items()}
    columns = list(encoder.feature_columns)
    if sorted(delft_columns) != sorted(columns):
        raise ModelFormatError(f"the recorded DeLFT feature columns {delft_columns} are not the model's {columns}")
    tables = []
    for column, vocab in zip(columns, encoder.features):  # in textorch's slot order, as the graph applies them
        table = [1] * (max(maps.get(column, {}).values(), default=0) + 1)
        for value, i in maps.get(column, {}).items():
            table[i] = vocab.id(value)
        tables.append(table)
    return DelftIds(labels, tag_vocab, [index[t] for t in labels], chars, delft_columns, maps, tables,
                    [delft_columns.index(c) for c in columns])


def _config(labeler, ids: DelftIds, source: dict | None, model_name: str) -> dict:
    """``config.json``: DeLFT's keys, with the imported model's own values where it has them."""
    delft = (source or {}).get("config") or {}
    model = labeler.model_config
    config = {
        "modelName": delft.get("model_name", model_name),
        "architecture": delft.get("architecture", model.architecture),
        "wordEmbeddingSize": delft.get("word_embedding_size", labeler.embeddings.dim),
        "charEmbeddingSize": delft.get("char_embedding_size", model.char_dim),
        "numCharLstmUnits": delft.get("num_char_lstm_units", model.char_hidden),
        "numWordLstmUnits": delft.get("num_word_lstm_units", model.word_hidden),
        "maxSequenceLength": delft.get("max_sequence_length", DEFAULT_MAX_SEQUENCE_LENGTH),
        "embeddingsName": delft.get("embeddings_name", _embeddings_name(labeler)),
    }
    if ids.feature_columns:
        config["featuresIndices"] = list(delft.get("features_indices") or ids.feature_columns)
        config["featuresEmbeddingSize"] = delft.get("features_embedding_size", model.feature_dim)
        config["featuresLstmUnits"] = delft.get("features_lstm_units", model.feature_output_dim // 2)
        config["featuresVocabularySize"] = delft.get("features_vocabulary_size",
                                                     labeler.data_config.feature_vocabulary_size)
    return config


def _embeddings_name(labeler) -> str:
    described = labeler.embeddings.describe() if hasattr(labeler.embeddings, "describe") else {}
    return str(described.get("name") or labeler.data_config.embeddings)


def _vocab(labeler, ids: DelftIds, source: dict | None) -> dict:
    """``vocab.json``, keyed as DeLFT's exporter keys it."""
    preprocessor = (source or {}).get("preprocessor") or {}
    vocab = {
        "charVocab": ids.char_vocab,
        "tagVocab": ids.label_vocab,
        "tagIndex": {str(i): label for i, label in enumerate(ids.labels)},
        "maxCharLength": int(preprocessor.get("max_char_length") or labeler.encoder.max_char_length),
    }
    if ids.feature_columns:
        features = preprocessor.get("feature_preprocessor") or {}
        vocab["featuresIndices"] = ids.feature_columns
        vocab["featuresVocabularySize"] = features.get("features_vocabulary_size",
                                                       labeler.data_config.feature_vocabulary_size)
        vocab["featuresMapToIndex"] = {str(c): m for c, m in ids.feature_maps.items()}
    return vocab


def _crf(labeler, ids: DelftIds) -> dict:
    """``crf_params.json``: textorch's CRF scores in the order of DeLFT's labels."""
    crf = labeler.model.head.crf
    order = torch.tensor(ids.label_order, dtype=torch.long)
    return {
        "transitions": crf.transitions.detach().cpu()[order][:, order].tolist(),
        "startTransitions": crf.start_transitions.detach().cpu()[order].tolist(),
        "endTransitions": crf.end_transitions.detach().cpu()[order].tolist(),
    }


def _example(labeler, ids: DelftIds) -> tuple[tuple[torch.Tensor, ...], list[str], dict]:
    """Two sequences of unequal length, as the runner pads them, and the graph's names and axes."""
    chars = labeler.encoder.max_char_length
    words = torch.zeros(2, 3, labeler.embeddings.dim)
    char_ids = torch.zeros(2, 3, chars, dtype=torch.long)
    char_ids[0, :, :2] = 1
    char_ids[1, :2, :3] = 1
    inputs = [words, char_ids]
    names = ["word_input", "char_input"]
    if ids.feature_columns:
        inputs.append(torch.zeros(2, 3, len(ids.feature_columns), dtype=torch.long))
        names.append("features_input")
    axes = {name: {0: "batch_size", 1: "seq_length"} for name in [*names, "emissions"]}
    return tuple(inputs), names, axes


def export_delft_layout(labeler, output: str | Path, source: dict | None = None, model_name: str = "model") -> Path:
    """Write DeLFT's ONNX layout of a loaded CRF tagger to ``output`` atomically.

    ``source``: the record an imported DeLFT model keeps of DeLFT's ``config`` and
    ``preprocessor`` (its values are then written as DeLFT wrote them), or None for a
    textorch-trained model; ``model_name``: its ``modelName`` then.
    """
    _check_model(labeler, labeler.model_config.architecture)
    ids = _delft_ids(labeler, source["preprocessor"]) if source and source.get("preprocessor") else _own_ids(labeler)
    module = DelftEncoder(labeler.model.cpu().eval(), ids).eval()
    inputs, names, axes = _example(labeler, ids)
    files = {CRF_FILE: _crf(labeler, ids), VOCAB_FILE: _vocab(labeler, ids, source),
             CONFIG_FILE: _config(labeler, ids, source, model_name)}
    return _write(Path(output), module, inputs, names, axes, files)


def _check_output(output: Path) -> None:
    if output.exists() and not output.is_dir():
        raise ConfigError(f"{output}: exists and is not a directory; choose another --output")
    if output.exists() and any(output.iterdir()) and not all((output / name).is_file() for name in LAYOUT_FILES):
        # Replacing the directory must never delete something that is not an earlier export.
        raise ConfigError(f"{output}: exists and is not a DeLFT-layout ONNX export; choose another --output")


def _write(output: Path, module: nn.Module, inputs: tuple, names: list[str], axes: dict, files: dict) -> Path:
    _check_output(output)
    with staged_directory(output) as staging:
        write_graph(module, dict(zip(names, inputs)), ["emissions"], axes, staging / ENCODER_FILE, OPSET)
        for name, content in files.items():
            (staging / name).write_text(json.dumps(content, indent=2, ensure_ascii=False), encoding="utf-8")
    logger.info("DeLFT-layout ONNX export written to %s", output)
    return output
