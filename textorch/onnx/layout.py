"""The names and versions of an ONNX export directory's files, apart from the code that writes them.

Readers that run an export without PyTorch (:mod:`textorch.tagging.onnx_tagger`) need these
and nothing of the exporter, which imports torch.
"""

from __future__ import annotations

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
FORMAT_VERSION = 1
GRAPH_REVISION = 3
"""How textorch builds graphs (not a format: every revision reads ``model.onnx`` the same way).
Revision 2 made each bidirectional RNN one native node; revision 3 added the character encoder
as a graph of its own beside the network that reads its vectors, so that a runner encodes each
distinct token once. An automatic export of an older revision is redone."""
OPSET = 17
