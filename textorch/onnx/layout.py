"""The names and versions of an ONNX export directory's files, apart from the code that writes them.

Readers that run an export without PyTorch (:mod:`textorch.tagging.onnx_tagger`) need these
and nothing of the exporter, which imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path

from textorch.errors import ModelFormatError

ONNX_FILE = "model.onnx"
QUANTIZED_FILE = "model.int8.onnx"
DESCRIPTION_FILE = "onnx-model.json"
TOKENIZER_FILE = "tokenizer.json"
LABELS_FILE = "labels.json"
CRF_FILE = "crf.json"
"""A CRF tagger's transitions, start and end scores (the decoder runs outside the graph)."""
CHAR_ENCODER_FILE = "char-encoder.onnx"
"""A tagger's character encoder alone: ``char_rows`` (types, chars) -> ``char_vectors`` (types, dim)."""
CHAR_VECTORS_MODEL_FILE = "model-char-vectors.onnx"
"""The network of ``model.onnx`` reading ``char_vectors`` (batch, length, dim) in place of ``char_ids``."""
QUANTIZED_CHAR_VECTORS_FILE = "model-char-vectors.int8.onnx"
"""The int8 twin of :data:`CHAR_VECTORS_MODEL_FILE` (with ``--quantize``; the character encoder stays float)."""
FORMAT_VERSION = 1
GRAPH_REVISION = 3
"""How textorch builds graphs (not a format: every revision reads ``model.onnx`` the same way).
Revision 2 made each bidirectional RNN one native node; revision 3 added the character encoder
as a graph of its own beside the network that reads its vectors, so that a runner encodes each
distinct token once. An automatic export of an older revision is redone."""
INT8_REVISION = 2
"""How textorch quantises (the int8 files only). Revision 1 left recurrent layers in float: the
exporter writes their weights as constant nodes, which ONNX Runtime's quantiser passes over;
revision 2 makes them initializers first, so LSTMs run in int8 too, quantises each weight row
with its own scale, and adds the int8 twin of the split network. An automatic export whose int8
files are older is redone when they are asked for."""
OPSET = 17


def read_description(directory: Path) -> dict | None:
    """An export directory's ``onnx-model.json``; None where there is none."""
    path = directory / DESCRIPTION_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"{path}: not readable JSON ({exc})") from None


def made_from_other_weights(description: dict, weights_sha256: str | None) -> bool:
    """Whether the export records weights other than those a model directory holds now (both known)."""
    recorded = description.get("source_weights_sha256")
    return bool(recorded and weights_sha256 and recorded != weights_sha256)


def older_revision(description: dict) -> bool:
    """Whether the export's graphs were built by an older :data:`GRAPH_REVISION` (an automatic
    export is then made again; one in a directory the user names is run as it is)."""
    return description.get("graph_revision", 1) < GRAPH_REVISION


def older_int8(description: dict) -> bool:
    """Whether the export's int8 files were made by an older :data:`INT8_REVISION` (or are absent)."""
    if not description.get("quantized_model_file"):
        return True
    return description.get("int8_revision", 1) < INT8_REVISION


def check_graph_labels(session: object, model_file: Path, n_labels: int, model_dir: str | Path) -> None:
    """Refuse a graph whose ``emissions`` give another number of labels than the model directory's
    ``vocab.json`` (an export of another model, or a vocabulary edited after it): its label ids
    would be read against the wrong list."""
    for output in session.get_outputs():  # type: ignore[attr-defined]
        if output.name != "emissions":
            continue
        size = output.shape[-1] if output.shape else None
        if isinstance(size, int) and size != n_labels:
            raise ModelFormatError(f"{model_file}: the graph gives {size} labels, but {Path(model_dir) / 'vocab.json'} "
                                   f"has {n_labels}; the export is not of this model")
