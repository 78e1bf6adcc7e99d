"""Export a tagger to ONNX: the network up to the emissions, plus plain-JSON vocabularies.

Recurrent taggers are exported through the padded equivalents of :mod:`textorch.models.export_layers`;
transformer taggers export their Hugging Face encoder as traced, with the sub-token windows as
inputs and the tokenizer's own ``tokenizer.json`` beside the graph. Decoding (CRF Viterbi or
softmax) stays outside the graph, so any program can run it from ``crf.json``. See
``docs/onnx.md`` for the layout of the export directory.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from textorch.errors import ConfigError
from textorch.models.encoders import IdentityEncoder, RecurrentEncoder
from textorch.models.heads import CRFHead
from textorch.models.tagger import SequenceTagger
from textorch.onnx.layout import (CHAR_ENCODER_FILE, CHAR_VECTORS_MODEL_FILE, CRF_FILE, LABELS_FILE,
                                  QUANTIZED_CHAR_VECTORS_FILE)
from textorch.onnx.files import (  # noqa: F401  (the constants are part of this module's API)
    DESCRIPTION_FILE,
    FORMAT_VERSION,
    ONNX_FILE,
    OPSET,
    QUANTIZED_FILE,
    TOKENIZER_FILE,
    Graph,
    describe,
    tokenizer_json,
    write_export,
)
from textorch.models.export_layers import PaddedBiRNN

__all__ = ["ExportableTagger", "PaddedBiRNN", "export_labeler"]

class ExportableTagger(nn.Module):
    """Emissions of a :class:`SequenceTagger` from plain tensors, in export-friendly operations.

    Inputs (see ``docs/onnx.md``): ``word_vectors``, ``input_ids``/``attention_mask``/``word_index``
    (transformers), ``char_ids``, ``casing_ids``, ``feature_ids`` and ``mask``; only those the
    architecture uses are graph inputs (see :attr:`input_names`).
    """

    def __init__(self, tagger: SequenceTagger, char_vectors_given: bool = False) -> None:
        super().__init__()
        # Each embedder knows its export form and the graph inputs it reads (models/embedders.py).
        # ``char_vectors_given``: the character encoder's output is an input (``char_vectors``),
        # computed apart by the graph of :class:`ExportableCharEncoder`.
        given = [char_vectors_given and _reads_chars(embedder) for embedder in tagger.embedders]
        self.parts = nn.ModuleList(nn.Identity() if g else embedder.export_form()
                                   for g, embedder in zip(given, tagger.embedders))
        self.part_inputs = [("char_vectors",) if g else embedder.graph_inputs for g, embedder in zip(given, tagger.embedders)]
        self.template_weight = None if tagger.template_emissions is None else tagger.template_emissions.weight
        templates = ["template_rows"] if self.template_weight is not None else []
        self.input_names: list[str] = list(dict.fromkeys(n for names in self.part_inputs for n in names)) + templates + ["mask"]
        if isinstance(tagger.encoder, RecurrentEncoder):
            self.encoder: nn.Module | None = PaddedBiRNN(tagger.encoder.rnn)
        elif isinstance(tagger.encoder, IdentityEncoder):
            self.encoder = None
        else:
            raise ConfigError(f"ONNX export does not know the encoder {type(tagger.encoder).__name__}")
        self.emissions = tagger.head.emissions

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        named = dict(zip(self.input_names, inputs))
        x = torch.cat([part(*(named[n] for n in names)) for part, names in zip(self.parts, self.part_inputs)], dim=-1)
        mask = named["mask"]
        h = self.encoder(x, mask.sum(dim=1)) if self.encoder is not None else x
        emissions = self.emissions(h)
        if self.template_weight is not None:  # a gather and a sum: what embedding_bag computes, in plain ONNX operators
            emissions = emissions + self.template_weight[named["template_rows"]].sum(dim=-2)
        return emissions * mask.unsqueeze(-1).to(h.dtype)


def _reads_chars(embedder: nn.Module) -> bool:
    return "char_ids" in embedder.graph_inputs


class ExportableCharEncoder(nn.Module):
    """A tagger's character encoder alone: ``char_rows`` ``(types, chars)`` -> ``char_vectors``
    ``(types, dim)``. A runner encodes each distinct token of a call once with it and gathers the
    rows per position for the network of :class:`ExportableTagger` with ``char_vectors_given``,
    as the PyTorch engine does; run per position, the character encoder is a large share of a
    tagging call (tokens repeat)."""

    def __init__(self, embedder: nn.Module) -> None:
        super().__init__()
        self.part = embedder.export_form()

    def forward(self, char_rows: torch.Tensor) -> torch.Tensor:
        return self.part(char_rows.unsqueeze(0))[0]


def char_encoder_graphs(labeler) -> dict[str, Graph]:
    """The character encoder's graph and the network over its vectors, by file name; none for a
    tagger without a character encoder, or with a transformer (whose export stays one graph)."""
    model = labeler.model
    readers = [embedder for embedder in model.embedders if _reads_chars(embedder)]
    if labeler.transformer is not None or len(readers) != 1:
        return {}
    encoder = ExportableCharEncoder(readers[0]).eval()
    char_rows = torch.tensor([[3, 4, 5, 0], [6, 0, 0, 0], [7, 8, 0, 0]], dtype=torch.long)
    char_graph = Graph(encoder, {"char_rows": char_rows}, ["char_vectors"],
                       dynamic_axes={"char_rows": {0: "types", 1: "chars"}, "char_vectors": {0: "types"}},
                       input_docs={"char_rows": {"dtype": "int64", "shape": ["types", "chars"],
                                                 "from": "vocab.json chars of each distinct token; 0 pads"}},
                       output_docs={"char_vectors": {"dtype": "float32", "shape": ["types", readers[0].output_dim]}})
    network = ExportableTagger(model.cpu(), char_vectors_given=True).eval()
    word_dim = labeler.embeddings.dim if labeler.embeddings is not None else 0
    inputs = example_inputs(network, word_dim, len(labeler.encoder.feature_columns), char_dim=readers[0].output_dim)
    network_graph = Graph(network, inputs, ["emissions"],
                          dynamic_axes={**{n: _AXES[n] for n in inputs}, "emissions": {0: "batch", 1: "length"}},
                          input_docs=_INPUT_DOCS,
                          output_docs={"emissions": {"dtype": "float32", "shape": ["batch", "length", len(labeler.encoder.labels)]}})
    return {CHAR_ENCODER_FILE: char_graph, CHAR_VECTORS_MODEL_FILE: network_graph}


def _window_examples(specials, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Two windows of unequal width (the second padded) holding the words of ``mask``'s rows.

    Padding in the example matters: transformers skips the attention mask when it is all ones,
    and a trace of that shortcut would ignore the mask at run time.
    """
    prefix, suffix = list(specials.prefix), list(specials.suffix)
    lengths = mask.sum(dim=1).tolist()
    rows = [prefix + [specials.unk_id] * n + suffix for n in lengths]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), specials.pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    word_index = torch.zeros(mask.shape, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        attention[i, : len(row)] = 1
        word_index[i, : lengths[i]] = i * width + len(prefix) + torch.arange(lengths[i])
    return {"input_ids": ids, "attention_mask": attention, "word_index": word_index}


def example_inputs(module: ExportableTagger, word_dim: int, n_features: int, specials=None,
                   char_dim: int = 0) -> dict[str, torch.Tensor]:
    """Small dummy inputs of the right ranks (two sequences of unequal length) for tracing."""
    lengths = torch.tensor([3, 2])
    mask = (torch.arange(3).unsqueeze(0) < lengths.unsqueeze(1)).long()
    values = {
        "word_vectors": torch.zeros(2, 3, word_dim),
        "char_ids": torch.ones(2, 3, 4, dtype=torch.long) * mask.unsqueeze(-1),
        "char_vectors": torch.ones(2, 3, char_dim) * mask.unsqueeze(-1),
        "casing_ids": torch.ones(2, 3, dtype=torch.long) * mask,
        "feature_ids": torch.ones(2, 3, max(n_features, 1), dtype=torch.long) * mask.unsqueeze(-1),
        "template_rows": torch.ones(2, 3, 2, dtype=torch.long) * mask.unsqueeze(-1),
        "mask": mask,
    }
    if specials is not None:
        values.update(_window_examples(specials, mask))
    return {name: values[name] for name in module.input_names}


_AXES = {
    "word_vectors": {0: "batch", 1: "length"},
    "input_ids": {0: "windows", 1: "width"},
    "attention_mask": {0: "windows", 1: "width"},
    "word_index": {0: "batch", 1: "length"},
    "char_ids": {0: "batch", 1: "length", 2: "chars"},
    "char_vectors": {0: "batch", 1: "length"},
    "casing_ids": {0: "batch", 1: "length"},
    "feature_ids": {0: "batch", 1: "length"},
    "template_rows": {0: "batch", 1: "length", 2: "templates"},
    "mask": {0: "batch", 1: "length"},
}

_INPUT_DOCS = {
    "word_vectors": {"dtype": "float32", "shape": ["batch", "length", "dim"], "from": "embeddings (zeros for unknown words)"},
    "input_ids": {"dtype": "int64", "shape": ["windows", "width"], "from": "tokenizer.json sub-tokens of each window, with the special tokens; pad_id pads"},
    "attention_mask": {"dtype": "int64", "shape": ["windows", "width"], "from": "1 for the sub-tokens of a window, 0 for padding"},
    "word_index": {"dtype": "int64", "shape": ["batch", "length"], "from": "window * width + position of the word's first sub-token in that window; 0 pads"},
    "char_ids": {"dtype": "int64", "shape": ["batch", "length", "chars"], "from": "vocab.json chars; 0 pads, 1 unknown"},
    "char_vectors": {"dtype": "float32", "shape": ["batch", "length", "dim"], "from": "char-encoder.onnx's vector of each position's token (model-char-vectors.onnx only); 0 pads"},
    "casing_ids": {"dtype": "int64", "shape": ["batch", "length"], "from": "vocab.json casing_classes"},
    "feature_ids": {"dtype": "int64", "shape": ["batch", "length", "features"], "from": "vocab.json features; 0 pads, 1 unknown"},
    "template_rows": {"dtype": "int64", "shape": ["batch", "length", "templates"], "from": "rows of the CRF-template feature table (textorch.data.template_features); 0 pads"},
    "mask": {"dtype": "int64", "shape": ["batch", "length"], "from": "1 for tokens, 0 for padding"},
}


def tagger_graph(labeler) -> Graph:
    """The emissions graph of a loaded :class:`~textorch.tagging.labeler.SequenceLabeler`, with example inputs."""
    # exactly a SequenceTagger: a subclass decodes otherwise (the sub-token CRF of imported BERT_CRF)
    if type(labeler.model) is not SequenceTagger:
        raise ConfigError(f"ONNX export does not support the {labeler.model_config.architecture} network"
                          f" ({type(labeler.model).__name__})")
    module = ExportableTagger(labeler.model.cpu()).eval()
    word_dim = labeler.embeddings.dim if labeler.embeddings is not None else 0
    specials = labeler.transformer.specials if labeler.transformer is not None else None
    inputs = example_inputs(module, word_dim, len(labeler.encoder.feature_columns), specials)
    n_labels = len(labeler.encoder.labels)
    return Graph(
        module, inputs, ["emissions"],
        dynamic_axes={**{n: _AXES[n] for n in inputs}, "emissions": {0: "batch", 1: "length"}},
        input_docs=_INPUT_DOCS,
        output_docs={"emissions": {"dtype": "float32", "shape": ["batch", "length", n_labels]}},
    )


def transformer_layout(parts) -> dict:
    """How a Java/C++ program turns words into ``input_ids``/``attention_mask``/``word_index``
    (the ``tokenizer`` section of ``onnx-model.json``; docs/onnx.md has the algorithm)."""
    specials = parts.specials
    return {
        "file": TOKENIZER_FILE,
        "kind": "huggingface-tokenizers",
        "input": "pre-split words, encoded as one pre-tokenized sequence without special tokens and without truncation",
        "lowercases": parts.lowercases,
        "labelled_sub_token": "first",
        "empty_word_id": specials.unk_id,
        "prefix_ids": list(specials.prefix),
        "suffix_ids": list(specials.suffix),
        "pad_id": specials.pad_id,
        "window": parts.window,
        "stride": parts.stride,
        "window_content": parts.window - specials.count,
        "word_window": "most-central",
        "model_type": getattr(parts.config, "model_type", None),
    }


def export_labeler(labeler, output: str | Path, quantize: bool = False, source_dir: str | Path | None = None) -> Path:
    """Write the ONNX export of a loaded :class:`~textorch.tagging.labeler.SequenceLabeler` atomically.

    ``source_dir``, the model directory the labeler was loaded from, lets the engine recognise
    an export made from an older version of the model (its weights' checksum is recorded).
    """
    graph = tagger_graph(labeler)
    encoder, head = labeler.encoder, labeler.model.head
    files: dict[str, object] = {
        LABELS_FILE: encoder.labels.items,
        "vocab.json": {
            "chars": encoder.chars.items,
            "features": [vocab.items for vocab in encoder.features],
            "feature_columns": encoder.feature_columns,
            "max_char_length": encoder.max_char_length,
            "casing_classes": list(_casing_classes()),
        },
    }
    if isinstance(head, CRFHead):
        crf = head.crf
        files[CRF_FILE] = {
            "transitions": crf.transitions.detach().cpu().tolist(),
            "start": crf.start_transitions.detach().cpu().tolist(),
            "end": crf.end_transitions.detach().cpu().tolist(),
        }
    description = describe("sequence_labelling", labeler.model_config.architecture, graph, quantize, source_dir)
    description["decoder"] = "crf" if isinstance(head, CRFHead) else "softmax"
    description["embeddings"] = labeler.embeddings.describe() if labeler.embeddings is not None else None
    binary = {}
    if labeler.transformer is not None:
        description["tokenizer"] = transformer_layout(labeler.transformer)
        binary[TOKENIZER_FILE] = tokenizer_json(labeler.transformer.tokenizer)
    extra_graphs = char_encoder_graphs(labeler)
    quantized_extras = {}
    if extra_graphs:
        description["char_encoder"] = {"model_file": CHAR_ENCODER_FILE, "network_file": CHAR_VECTORS_MODEL_FILE,
                                       "input": "char_rows", "output": "char_vectors"}
        if quantize:  # the character encoder runs once per distinct token: it stays float
            description["char_encoder"]["quantized_network_file"] = QUANTIZED_CHAR_VECTORS_FILE
            quantized_extras[CHAR_VECTORS_MODEL_FILE] = QUANTIZED_CHAR_VECTORS_FILE
    files[DESCRIPTION_FILE] = description
    return write_export(output, graph, files, quantize, binary, extra_graphs, quantized_extras)


def _casing_classes() -> tuple[str, ...]:
    from textorch.data.encoding import CASING_CLASSES

    return CASING_CLASSES
