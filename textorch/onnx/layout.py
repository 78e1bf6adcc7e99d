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
FORMAT_VERSION = 1
GRAPH_REVISION = 2
"""How textorch builds graphs (not a format: every revision reads the same way). Revision 2 made
each bidirectional RNN one native node; an automatic export of an older revision is redone."""
OPSET = 17
