"""Whether PyTorch is capturing a graph (tracing, ``torch.compile``, ONNX export) right now.

The laid-out LSTM weights (:mod:`textorch.models.onednn_lstm`) call internal operators that a captured graph must not contain, so they step aside then.
"""

from __future__ import annotations

import sys

import torch


def being_captured() -> bool:
    """Tracing, compiling or exporting to ONNX.

    ``torch.onnx`` is asked only once something has imported it: an export cannot be under way
    before that, and touching ``torch.onnx`` imports it, a cost the first tagging call of a
    process would pay in processes that never export."""
    if torch.jit.is_tracing() or torch.compiler.is_compiling():
        return True
    onnx = sys.modules.get("torch.onnx")
    return onnx is not None and onnx.is_in_onnx_export()
