"""Dense layers at inference on the CPU through oneDNN instead of the BLAS behind ``F.linear``.

PyTorch's CPU wheels run ``F.linear`` through Intel MKL, which on some processors does not take
the widest vector instructions the CPU offers; oneDNN (also in the wheel, already running our
LSTMs) does, and fuses the tagger's tanh into the product. oneDNN costs more per call, so small
products stay with ``F.linear`` (``ONEDNN_MIN_MACS``). Results differ from MKL's only by rounding
(about 1e-6). The operator is private to PyTorch (:mod:`textorch.runtime.onednn_ops`): where it
is missing, ``F.linear`` runs. Measurements: docs/performance.md.

Only where nothing needs the product's gradient, in fp32 (or in bfloat16 under CPU bfloat16
autocast, see ``_onednn_dtype``), outside tracing and export (ONNX graphs and ``torch.compile``
see the plain ``F.linear``). Training keeps the ordinary path and its autograd.
"""

from __future__ import annotations

import functools
import logging

import torch
import torch.nn.functional as F
from torch import nn

from textorch.runtime.onednn_ops import mkldnn_op
from textorch.runtime.precision import onednn_inference_dtype
from textorch.models.graph_capture import being_captured

logger = logging.getLogger(__name__)

ONEDNN_MIN_MACS = 1_000_000
"""Multiply-adds (rows x inputs x outputs) from which oneDNN's product beat MKL's in our
measurements (docs/performance.md): below it oneDNN's larger fixed cost per call dominates."""

ACTIVATIONS = ("none", "tanh", "relu")


@functools.cache
def onednn_linear_available() -> bool:
    """Whether this torch has oneDNN's dense-layer operator and it agrees with ``F.linear``.

    Tried once on a tiny layer rather than assumed from the version: the operator is internal to
    PyTorch (``torch.compile`` calls it), so a build without it, or with another signature, must
    quietly keep ``F.linear``."""
    op = mkldnn_op("_linear_pointwise")
    if op is None:
        return False
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(3, 5, generator=generator)
        weight = torch.randn(4, 5, generator=generator)
        bias = torch.randn(4, generator=generator)
        with torch.no_grad(), torch.autocast("cpu", enabled=False):  # the first call may come under autocast
            return bool(torch.allclose(op(x, weight, bias, "tanh", [], ""), torch.tanh(F.linear(x, weight, bias)),
                                       atol=1e-5))
    except (AttributeError, RuntimeError, TypeError) as error:
        logger.debug("oneDNN dense layers unavailable: %s", error)
        return False


def _onednn_dtype(x: torch.Tensor, weight: torch.Tensor) -> torch.dtype | None:
    """The number format oneDNN's product runs in here, or None for the ordinary path: float32
    outside autocast; bfloat16 under CPU bfloat16 autocast (``--precision bf16``) on a CPU
    that has it natively (:func:`textorch.runtime.precision.onednn_inference_dtype`, the rule
    the LSTMs' laid-out weights follow too), where autocast's own ``F.linear`` was no faster
    than fp32 and oneDNN's bfloat16 product was, even with the weights cast on every call."""
    # Cheapest tests first: one-sequence calls (small products) leave at the second.
    if x.dtype not in (torch.float32, torch.bfloat16) or weight.dtype != torch.float32 or x.dim() < 2:
        return None
    if (x.numel() // max(x.shape[-1], 1)) * weight.shape[0] * weight.shape[1] < ONEDNN_MIN_MACS:
        return None
    if x.device.type != "cpu" or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)):
        return None
    if being_captured():
        return None
    if not onednn_linear_available():
        return None
    return onednn_inference_dtype(x)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str = "none") -> torch.Tensor:
    """``activation(F.linear(x, weight, bias))``: through oneDNN, activation fused, where that pays
    (see the module docstring), else the ordinary way."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    dtype = _onednn_dtype(x, weight)
    if dtype is not None:
        if dtype != torch.float32:
            x, weight = x.to(dtype), weight.to(dtype)
            bias = None if bias is None else bias.to(dtype)
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, activation, [], "")
    out = F.linear(x, weight, bias)
    if activation == "tanh":
        return torch.tanh(out)
    if activation == "relu":
        return torch.relu(out)
    return out


class CpuLinear(nn.Linear):
    """``nn.Linear`` whose inference product may run through oneDNN (:func:`linear`); the same
    parameters and state-dict names, so saved models load either way."""

    @classmethod
    def from_linear(cls, layer: nn.Linear) -> "CpuLinear":
        """A ``CpuLinear`` holding ``layer``'s very Parameter objects (tied weights stay tied, an
        optimizer over them keeps working), in its training mode; nothing is copied."""
        made = cls(layer.in_features, layer.out_features, bias=layer.bias is not None, device="meta")
        made.weight = layer.weight
        made.bias = layer.bias
        made.train(layer.training)
        return made

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


class TanhDense(nn.Sequential):
    """``Linear -> Tanh -> Linear`` (DeLFT's dense layer before the output) with the tanh fused
    into the first product at inference. Children keep the indices 0, 1, 2 of the plain
    ``nn.Sequential`` it replaces: the state-dict names of saved models are unchanged."""

    def __init__(self, input_dim: int, hidden: int, output_dim: int) -> None:
        super().__init__(CpuLinear(input_dim, hidden), nn.Tanh(), CpuLinear(hidden, output_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, _, last = self
        return last(linear(x, first.weight, first.bias, "tanh"))


def use_onednn_linears(module: nn.Module) -> nn.Module:
    """``module`` with every plain ``nn.Linear`` inside it (a Hugging Face encoder, say) replaced
    by a :class:`CpuLinear` sharing its parameters (:meth:`CpuLinear.from_linear`): names and
    state dict stay. The replacement is set on the parent module; the third-party layer objects
    themselves are not changed. Layers with hooks keep their class and their hooks. A layer
    that appears under several parents gets one replacement. Returns ``module`` (a replacement
    where ``module`` itself is such a layer)."""
    replacements: dict[int, CpuLinear] = {}

    def replacement(layer: nn.Module) -> CpuLinear | None:
        if type(layer) is not nn.Linear or _has_hooks(layer):
            return None
        if id(layer) not in replacements:
            replacements[id(layer)] = CpuLinear.from_linear(layer)
        return replacements[id(layer)]

    top = replacement(module)
    if top is not None:
        return top
    for parent in list(module.modules()):
        for name, child in list(parent._modules.items()):  # every name, a layer shared by two included
            made = replacement(child)
            if made is not None:
                setattr(parent, name, made)
    return module


def _has_hooks(layer: nn.Module) -> bool:
    return any(getattr(layer, name, None) for name in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                                                 "_backward_pre_hooks", "_state_dict_hooks",
                                                 "_load_state_dict_pre_hooks"))
