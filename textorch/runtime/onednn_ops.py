"""PyTorch's private oneDNN operators, looked up in one place.

textorch calls a few operators that PyTorch keeps for its own compiler (``torch.ops.mkldnn``:
a fused dense layer, LSTM weights laid out once, the bfloat16 probe). They are not part of its
public API and may be missing or different in a build or a release that ``torch>=2.4`` admits.
Each caller asks :func:`mkldnn_op` once, tries the operator on a tiny input at first use, and
otherwise runs the public path (``F.linear``, ``torch.lstm``, no bfloat16), which gives the same
results up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def mkldnn_op(name: str) -> Callable | None:
    """``torch.ops.mkldnn.<name>`` where this torch has it, else None (a build without oneDNN,
    or a release that renamed or dropped it)."""
    try:
        namespace = torch.ops.mkldnn
        return getattr(namespace, name) if hasattr(namespace, name) else None
    except (AttributeError, RuntimeError):
        return None
