"""Export a recurrent tagger to ONNX: the network up to the emissions, plus plain-JSON vocabularies.

The training network packs sequences (``pack_padded_sequence``), which the ONNX exporter does
not translate. The exported graph computes the same thing on padded tensors instead: each
bidirectional RNN is split into its two directions, and the backward direction reads every
sequence reversed *within its own length* (a gather), so it never sees padding. Decoding (CRF
Viterbi or softmax) stays outside the graph, so any program can run it from ``crf.json``.
See ``docs/onnx.md`` for the layout of the export directory.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from textorch.errors import ConfigError
from textorch.models.embedders import (
    CasingEmbedder,
    CharBiLSTMEmbedder,
    CharCNNEmbedder,
    FeatureEmbedder,
    WordVectorEmbedder,
)
from textorch.models.heads import CRFHead
from textorch.models.tagger import SequenceTagger

logger = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
QUANTIZED_FILE = "model.int8.onnx"
DESCRIPTION_FILE = "onnx-model.json"
FORMAT_VERSION = 1
OPSET = 17


def _split_directions(rnn: nn.RNNBase) -> tuple[nn.RNNBase, nn.RNNBase]:
    """Two one-direction RNNs holding the weights of a one-layer bidirectional ``rnn``."""
    if rnn.num_layers != 1 or not rnn.bidirectional or not rnn.batch_first:
        raise ConfigError("ONNX export supports one-layer, bidirectional, batch-first RNNs only")
    directions = []
    for suffix in ("", "_reverse"):
        single = type(rnn)(rnn.input_size, rnn.hidden_size, batch_first=True)
        with torch.no_grad():
            for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                getattr(single, name).copy_(getattr(rnn, name + suffix))
        directions.append(single.eval())
    return directions[0], directions[1]


def _reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T) positions that read each row backwards within its length; padding stays in place."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(0)
    n = lengths.unsqueeze(1)
    return torch.where(t < n, n - 1 - t, t)


def _gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return x.gather(1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


class PaddedBiRNN(nn.Module):
    """A bidirectional RNN on right-padded input, equal to the packed one on every real step."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.forward_rnn, self.backward_rnn = _split_directions(rnn)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Outputs (B, T, 2H); rows past a sequence's length hold values nobody should read."""
        index = _reverse_index(lengths, x.shape[1])
        forward_out, _ = self.forward_rnn(x)
        backward_out, _ = self.backward_rnn(_gather_time(x, index))
        return torch.cat([forward_out, _gather_time(backward_out, index)], dim=-1)


class _CharBiLSTM(nn.Module):
    def __init__(self, embedder: CharBiLSTMEmbedder) -> None:
        super().__init__()
        self.embedding = embedder.embedding
        self.rnn = PaddedBiRNN(embedder.lstm)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        lengths = (flat != 0).sum(dim=1)
        out = self.rnn(self.embedding(flat), lengths)  # (N, C, 2H)
        half = out.shape[-1] // 2
        last = (lengths - 1).clamp(min=0)
        # Final states: the forward direction's at the last character; the backward
        # direction ends on the first character, so after un-reversing it sits at position 0.
        forward_final = out[torch.arange(b * l), last, :half]
        backward_final = out[:, 0, half:]
        present = (lengths > 0).unsqueeze(1).to(out.dtype)  # tokens without characters are zeros
        return (torch.cat([forward_final, backward_final], dim=-1) * present).reshape(b, l, -1)


class ExportableTagger(nn.Module):
    """Emissions of a :class:`SequenceTagger` from plain tensors, in export-friendly operations.

    Inputs: ``word_vectors`` (B, L, D) float, ``char_ids`` (B, L, C) int64, ``casing_ids``
    (B, L) int64, ``feature_ids`` (B, L, F) int64, ``mask`` (B, L) int64 (1 for tokens);
    only those the architecture uses are graph inputs (see :attr:`input_names`).
    """

    def __init__(self, tagger: SequenceTagger) -> None:
        super().__init__()
        self.parts = nn.ModuleList()
        self.input_names: list[str] = []
        for embedder in tagger.embedders:
            if isinstance(embedder, WordVectorEmbedder):
                self.parts.append(nn.Identity())
                name = "word_vectors"
            elif isinstance(embedder, CharBiLSTMEmbedder):
                self.parts.append(_CharBiLSTM(embedder))
                name = "char_ids"
            elif isinstance(embedder, CharCNNEmbedder):
                self.parts.append(_CharCNN(embedder))
                name = "char_ids"
            elif isinstance(embedder, CasingEmbedder):
                self.parts.append(embedder.embedding)
                name = "casing_ids"
            elif isinstance(embedder, FeatureEmbedder):
                self.parts.append(_Features(embedder))
                name = "feature_ids"
            else:
                raise ConfigError(f"ONNX export does not know the embedder {type(embedder).__name__}")
            self.input_names.append(name)
        self.part_inputs = list(self.input_names)
        self.input_names = list(dict.fromkeys(self.input_names)) + ["mask"]
        self.encoder = PaddedBiRNN(tagger.encoder.rnn)
        self.emissions = tagger.head.emissions

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        named = dict(zip(self.input_names, inputs))
        x = torch.cat([part(named[name]) for part, name in zip(self.parts, self.part_inputs)], dim=-1)
        mask = named["mask"]
        h = self.encoder(x, mask.sum(dim=1))
        return self.emissions(h) * mask.unsqueeze(-1).to(h.dtype)


class _CharCNN(nn.Module):
    def __init__(self, embedder: CharCNNEmbedder) -> None:
        super().__init__()
        self.embedder = embedder

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        b, l, c = char_ids.shape
        flat = char_ids.reshape(b * l, c)
        h = self.embedder.conv(self.embedder.embedding(flat).transpose(1, 2))
        empty = (flat == 0).unsqueeze(1)
        # A large negative instead of -inf: tokens without characters come out as zeros below.
        pooled = h.masked_fill(empty, -1e30).max(dim=2).values
        present = (~empty).any(dim=2).to(h.dtype)
        return (pooled * present).reshape(b, l, -1)


class _Features(nn.Module):
    def __init__(self, embedder: FeatureEmbedder) -> None:
        super().__init__()
        self.embedder = embedder

    def forward(self, feature_ids: torch.Tensor) -> torch.Tensor:
        parts = [emb(feature_ids[..., i]) for i, emb in enumerate(self.embedder.embeddings)]
        return torch.tanh(self.embedder.projection(torch.cat(parts, dim=-1)))


def example_inputs(module: ExportableTagger, word_dim: int, n_features: int) -> tuple[torch.Tensor, ...]:
    """Small dummy inputs of the right ranks (two sequences of unequal length) for tracing."""
    lengths = torch.tensor([3, 2])
    mask = (torch.arange(3).unsqueeze(0) < lengths.unsqueeze(1)).long()
    values = {
        "word_vectors": torch.zeros(2, 3, word_dim),
        "char_ids": torch.ones(2, 3, 4, dtype=torch.long) * mask.unsqueeze(-1),
        "casing_ids": torch.ones(2, 3, dtype=torch.long) * mask,
        "feature_ids": torch.ones(2, 3, max(n_features, 1), dtype=torch.long) * mask.unsqueeze(-1),
        "mask": mask,
    }
    return tuple(values[name] for name in module.input_names)


_AXES = {
    "word_vectors": {0: "batch", 1: "length"},
    "char_ids": {0: "batch", 1: "length", 2: "chars"},
    "casing_ids": {0: "batch", 1: "length"},
    "feature_ids": {0: "batch", 1: "length"},
    "mask": {0: "batch", 1: "length"},
}


def export_labeler(labeler, output: str | Path, quantize: bool = False) -> Path:
    """Write the ONNX export of a loaded :class:`~textorch.labeler.SequenceLabeler` atomically."""
    if labeler.transformer is not None or not isinstance(labeler.model, SequenceTagger):
        raise ConfigError(
            f"ONNX export supports the recurrent taggers (BidLSTM*, BidGRU*) only, not {labeler.model_config.architecture}"
        )
    output = Path(output)
    if output.exists() and any(output.iterdir()) and not (output / DESCRIPTION_FILE).exists():
        # Replacing the directory must never delete something that is not an earlier export.
        raise ConfigError(f"{output}: exists and is not an ONNX export; choose another --output")
    module = ExportableTagger(labeler.model.cpu()).eval()
    word_dim = labeler.embeddings.dim if labeler.embeddings is not None else 0
    inputs = example_inputs(module, word_dim, len(labeler.encoder.feature_columns))
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The exporter warns about RNN batch sizes (we pass no initial state, so any batch
            # size works) and negative indices (ours never are): both are tested not to apply.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            torch.onnx.export(
                module, inputs, str(staging / ONNX_FILE), input_names=module.input_names,
                output_names=["emissions"], opset_version=OPSET, dynamo=False,
                dynamic_axes={**{n: _AXES[n] for n in module.input_names}, "emissions": {0: "batch", 1: "length"}},
            )
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(str(staging / ONNX_FILE), str(staging / QUANTIZED_FILE), weight_type=QuantType.QInt8)
        _write_json_files(labeler, module, staging, quantize)
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("ONNX export written to %s", output)
    return output


def _write_json_files(labeler, module: ExportableTagger, directory: Path, quantize: bool) -> None:
    encoder = labeler.encoder
    head = labeler.model.head
    files: dict[str, object] = {
        "labels.json": encoder.labels.items,
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
        files["crf.json"] = {
            "transitions": crf.transitions.detach().cpu().tolist(),
            "start": crf.start_transitions.detach().cpu().tolist(),
            "end": crf.end_transitions.detach().cpu().tolist(),
        }
    files[DESCRIPTION_FILE] = {
        "format_version": FORMAT_VERSION,
        "task": "sequence_labelling",
        "architecture": labeler.model_config.architecture,
        "model_file": ONNX_FILE,
        "quantized_model_file": QUANTIZED_FILE if quantize else None,
        "decoder": "crf" if isinstance(head, CRFHead) else "softmax",
        "inputs": [{"name": n, **_INPUT_DOCS[n]} for n in module.input_names],
        "outputs": [{"name": "emissions", "dtype": "float32", "shape": ["batch", "length", len(encoder.labels)]}],
        "embeddings": labeler.embeddings.describe() if labeler.embeddings is not None else None,
        "opset": OPSET,
    }
    for name, content in files.items():
        (directory / name).write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _casing_classes() -> tuple[str, ...]:
    from textorch.data.encoding import CASING_CLASSES

    return CASING_CLASSES


_INPUT_DOCS = {
    "word_vectors": {"dtype": "float32", "shape": ["batch", "length", "dim"], "from": "embeddings (zeros for unknown words)"},
    "char_ids": {"dtype": "int64", "shape": ["batch", "length", "chars"], "from": "vocab.json chars; 0 pads, 1 unknown"},
    "casing_ids": {"dtype": "int64", "shape": ["batch", "length"], "from": "vocab.json casing_classes"},
    "feature_ids": {"dtype": "int64", "shape": ["batch", "length", "features"], "from": "vocab.json features; 0 pads, 1 unknown"},
    "mask": {"dtype": "int64", "shape": ["batch", "length"], "from": "1 for tokens, 0 for padding"},
}
