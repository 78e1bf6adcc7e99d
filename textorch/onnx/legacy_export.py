"""The TorchScript-based exporter, kept only for the layers PyTorch's supported exporter gets wrong.

:func:`textorch.onnx.exporter.write_graph` writes every graph with the ``torch.export``-based
exporter except those holding one of :data:`LEGACY_LAYERS` or written at an opset older than
:data:`OLDEST_NEW_OPSET`, each with what goes wrong in the new exporter (``tests/onnx/test_exporter.py`` asserts each failure, so that the day one is
fixed the layer can leave the list). PyTorch has deprecated this exporter: its warning is
silenced here, where using it is a decision, and nowhere else.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from textorch.models.classifiers import DPCNN, Conv, MaxMeanPooling, Pool
from textorch.models.export_layers import CharCNN

_NO_REDUCE_MAX_AT_17 = (
    "a max over an axis is a ReduceMax node, which the new exporter writes at opset 18 only (its "
    "converter finds no way down to the opset asked for, and leaves the graph at 18)")
LEGACY_LAYERS: dict[type[nn.Module], str] = {
    CharCNN: _NO_REDUCE_MAX_AT_17 + ": the max over each token's characters",
    MaxMeanPooling: _NO_REDUCE_MAX_AT_17 + ": the max over a text's positions",
    Conv: "the 'same' padding is a Pad node, which the new exporter writes at opset 18 only (no converter "
          "down to the opset asked for)",
    Pool: "max pooling with ceil_mode: torch.export fixes the text length to the example's, so the graph "
          "would refuse every other length",
    DPCNN: "its halving pools are max pooling with ceil_mode: torch.export fixes the text length to the "
           "example's, so the graph would refuse every other length",
}
"""Layers whose graphs the TorchScript exporter writes, with what the new exporter gets wrong."""

OLDEST_NEW_OPSET = 15
"""The oldest opset the new exporter reaches: it builds at 18 and converts down, and its
converter has no way below 15 for the ``Shape`` nodes of a graph that reads an axis's size
(DeLFT's layout, at opset 14, is therefore written by the TorchScript exporter)."""

NATIVE_BIRNN = "textorch::native_birnn"


def legacy_reason(module: nn.Module, opset: int) -> str | None:
    """Why ``module`` is exported at ``opset`` with the TorchScript exporter, or None (the new exporter)."""
    if opset < OLDEST_NEW_OPSET:
        return f"opset {opset}: the new exporter writes the Shape nodes of a graph at opset {OLDEST_NEW_OPSET} or later only"
    for layer in module.modules():
        reason = LEGACY_LAYERS.get(type(layer))
        if reason is not None:
            return f"{type(layer).__name__}: {reason}"
    return None


@torch.onnx.symbolic_helper.parse_args("v", "v", "v", "v", "v", "s", "i", "b")
def _native_birnn(g, x, lengths, weights, recurrent, biases, kind: str, hidden: int, final: bool):  # noqa: ANN001, ANN201
    """``textorch::native_birnn`` as TorchScript-exporter nodes: the nodes of
    :func:`textorch.onnx.exporter._native_birnn`, built with this exporter's graph API."""
    steps_first = g.op("Transpose", x, perm_i=[1, 0, 2])
    sequence_lens = g.op("Cast", lengths, to_i=6)  # int32, as the operator wants
    extra = {"linear_before_reset_i": 1} if kind == "GRU" else {}  # PyTorch's GRU formula
    outputs = g.op(kind, steps_first, weights, recurrent, biases, sequence_lens, hidden_size_i=hidden,
                   direction_s="bidirectional", outputs=3 if kind == "LSTM" else 2, **extra)
    if final:  # Y_h (2, B, H) -> (B, 2H): forward final state, then backward
        return g.op("Flatten", g.op("Transpose", outputs[1], perm_i=[1, 0, 2]), axis_i=1)
    by_batch = g.op("Transpose", outputs[0], perm_i=[2, 0, 1, 3])  # Y (T, 2, B, H) -> (B, T, 2, H)
    return g.op("Reshape", by_batch, g.op("Constant", value_t=torch.tensor([0, 0, -1], dtype=torch.int64)))


@contextmanager
def _native_birnn_known(opset: int) -> Iterator[None]:
    """The exporter knows how to write ``textorch::native_birnn`` for one export, and no longer."""
    torch.onnx.register_custom_op_symbolic(NATIVE_BIRNN, _native_birnn, opset)
    try:
        yield
    finally:
        torch.onnx.unregister_custom_op_symbolic(NATIVE_BIRNN, opset)


def write_legacy_graph(module: nn.Module, inputs: Mapping[str, torch.Tensor], output_names: Sequence[str],
                       dynamic_axes: Mapping[str, Mapping[int, str]], path: Path, opset: int) -> None:
    """Export ``module`` with the TorchScript exporter (see :data:`LEGACY_LAYERS` for when)."""
    with torch.no_grad(), warnings.catch_warnings(), _native_birnn_known(opset):
        # Its deprecation (the decision to use it is above); RNN batch sizes (no initial state is
        # passed, so any batch size works); negative indices (ours never are); traced Python
        # conditions (the example inputs take the general path; the tests check other shapes).
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*legacy TorchScript-based ONNX")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.onnx")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(
            module.eval(), tuple(inputs.values()), str(path), input_names=list(inputs),
            output_names=list(output_names), opset_version=opset, dynamo=False, dynamic_axes=dict(dynamic_axes),
        )
