"""One direction of an LSTM at CPU inference with oneDNN's weight layout made once, not per call.

``torch.lstm`` on the CPU hands its weights to oneDNN as plain matrices, and oneDNN reorders
them into its blocked layout on every call. For the small batches of tagging that reorder is
most of a call's fixed cost, and the outputs are bit for bit the same with weights laid out
beforehand. PyTorch keeps such laid-out weights only inside ``torch.compile``'s frozen graphs
(the operators below are the ones it calls, private to PyTorch: :mod:`textorch.runtime.onednn_ops`),
so this module keeps them itself, per module and direction, and lays them out again whenever a
weight is replaced or written in any way (:class:`textorch.models.weight_state.WeightSnapshot`
compares their bits). A lock guards the kept layouts: threads tagging with one model share them.

Only where nothing needs gradients, outside tracing and export, in float32 outside autocast or
in bfloat16 under CPU bfloat16 autocast (``--precision bf16``) on a CPU that has it natively:
there ``torch.lstm`` cast and reordered the weights on every call, and bfloat16 weights kept
laid out are what makes bf16 tagging pay, with the same labels as autocast's ``torch.lstm``.
Everywhere else (training, GRUs, ONNX export) ``torch.lstm`` runs as before. Measurements:
docs/performance.md.
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from textorch.runtime.onednn_ops import mkldnn_op
from textorch.runtime.precision import onednn_inference_dtype
from textorch.models.graph_capture import being_captured
from textorch.models.weight_state import WeightSnapshot

logger = logging.getLogger(__name__)

LSTM_MODE = 2
"""oneDNN's (and cuDNN's) number for the LSTM cell in ``aten::mkldnn_rnn_layer``."""


@dataclass
class _LaidOut:
    """Reordered weights of one direction of one layer, its biases, and what they were made from."""

    weight_ih: torch.Tensor
    weight_hh: torch.Tensor
    bias_ih: torch.Tensor
    bias_hh: torch.Tensor
    made_from: WeightSnapshot

    @classmethod
    def of(cls, sources: tuple[torch.Tensor, ...], hidden_size: int, dtype: torch.dtype = torch.float32) -> "_LaidOut":
        weight_ih, weight_hh, bias_ih, bias_hh = (t.detach() for t in sources)
        return cls._reordered(weight_ih, weight_hh, bias_ih, bias_hh, hidden_size, sources, dtype)

    @classmethod
    def _reordered(cls, weight_ih: torch.Tensor, weight_hh: torch.Tensor, bias_ih: torch.Tensor, bias_hh: torch.Tensor,
                   hidden_size: int, sources: tuple[torch.Tensor, ...], dtype: torch.dtype) -> "_LaidOut":
        """The weight matrices in ``dtype`` and oneDNN's layout; the biases stay float32, as
        oneDNN's bfloat16 LSTM takes them (it adds them in float32)."""
        made_from = WeightSnapshot(sources)
        weights = torch.ops.mkldnn._reorder_mkldnn_rnn_layer_weight(weight_ih.to(dtype), weight_hh.to(dtype), hidden_size,
                                                                    False, True, False)
        return cls(weights[0], weights[1], bias_ih, bias_hh, made_from)

    def still_valid(self, sources: tuple[torch.Tensor, ...]) -> bool:
        return self.made_from.matches(sources)


# Per module, not on it: the reordered tensors (oneDNN's own layout) must not reach
# state_dict, deepcopy or pickling of the model; they go when the module goes.
_laid_out: "weakref.WeakKeyDictionary[nn.LSTM, dict[tuple[int, str, torch.dtype], _LaidOut]]" = weakref.WeakKeyDictionary()
_laid_out_lock = threading.Lock()


@functools.cache
def laid_out_lstm_available(dtype: torch.dtype = torch.float32) -> bool:
    """Whether this torch has the operators and they give ``torch.lstm``'s outputs in ``dtype``
    (float32: to 1e-5; bfloat16: to bfloat16's precision, against ``torch.lstm`` under autocast).

    Tried once on a tiny LSTM rather than assumed: the operators are internal to PyTorch, so a
    build without them (or with other signatures) must quietly keep ``torch.lstm``."""
    if mkldnn_op("_reorder_mkldnn_rnn_layer_weight") is None or not hasattr(torch.ops.aten, "mkldnn_rnn_layer"):
        return False
    try:
        if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
            return False
        generator = torch.Generator().manual_seed(0)
        # Normal tensors even when first asked under inference mode (tagging calls are), and the
        # global random state untouched: the first call may be a validation pass mid-training.
        with torch.inference_mode(False), torch.no_grad(), torch.random.fork_rng(devices=[]):
            lstm = nn.LSTM(3, 4)
            for parameter in lstm.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
            x = torch.randn(2, 5, 3, generator=generator)
            bf16 = dtype == torch.bfloat16
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                expected = lstm(x)[0].float()
            with torch.autocast("cpu", enabled=False):
                got = _run(_LaidOut.of(_sources(lstm, 0, ""), lstm.hidden_size, dtype), x, lstm.hidden_size)
            return got.dtype == dtype and bool(torch.allclose(got.float(), expected, atol=2e-2 if bf16 else 1e-5))
    except (AttributeError, RuntimeError, TypeError) as error:
        logger.debug("pre-reordered %s LSTM weights unavailable: %s", dtype, error)
        return False


def run_dtype(rnn: nn.RNNBase, x: torch.Tensor) -> torch.dtype | None:
    """The number format :func:`lstm_direction` runs this call in (see the module docstring):
    float32, bfloat16 under CPU bfloat16 autocast on a CPU with native bfloat16, or None where
    it does not serve the call (``torch.lstm`` then runs)."""
    if not isinstance(rnn, nn.LSTM) or rnn.proj_size or not rnn.bias or rnn.training:
        return None
    if x.device.type != "cpu" or rnn.weight_ih_l0.dtype != torch.float32 or not x.numel():
        return None
    if torch.is_grad_enabled() and (x.requires_grad or rnn.weight_ih_l0.requires_grad):
        return None
    dtype = onednn_inference_dtype(x)
    if dtype is None or being_captured():
        return None
    return dtype if laid_out_lstm_available(dtype) else None


def applies(rnn: nn.RNNBase, x: torch.Tensor) -> bool:
    """Whether :func:`lstm_direction` serves this call (:func:`run_dtype`)."""
    return run_dtype(rnn, x) is not None


def call_dtype() -> torch.dtype:
    """The format of a call that :func:`applies`: bfloat16 exactly when under autocast."""
    return torch.bfloat16 if torch.is_autocast_enabled("cpu") else torch.float32


def lstm_direction(rnn: nn.LSTM, x: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    """``(B, T, H)``: one direction (``suffix`` "" or "_reverse") of layer ``layer`` run
    forwards over batch-first ``x`` from zero states, as ``torch.lstm`` would. Call only where
    :func:`applies`."""
    return time_major_direction(rnn, x.transpose(0, 1), layer, suffix).transpose(0, 1)


def time_major_direction(rnn: nn.LSTM, x: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    """:func:`lstm_direction` over time-major ``x`` ``(T, B, D)``, giving ``(T, B, H)``: oneDNN's
    own order, so nothing is transposed. Call only where :func:`applies`."""
    sources = _sources(rnn, layer, suffix)
    return _run(_entry(rnn, (layer, suffix), sources, _LaidOut.of), x, rnn.hidden_size)


def _entry(rnn: nn.LSTM, key: tuple[int, str], sources: tuple[torch.Tensor, ...],
           make: Callable[[tuple[torch.Tensor, ...], int, torch.dtype], _LaidOut]) -> _LaidOut:
    """The reordered weights kept under ``key`` for ``rnn`` in this call's format (float32 and
    bfloat16 ones side by side), made again where ``sources`` changed."""
    dtype = call_dtype()
    entries = _laid_out.get(rnn)
    entry = None if entries is None else entries.get((*key, dtype))
    if entry is not None and entry.still_valid(sources):
        return entry
    entry = make(sources, rnn.hidden_size, dtype)
    with _laid_out_lock:  # the dictionaries are shared by every thread tagging with this module
        entries = _laid_out.get(rnn)
        if entries is None:
            entries = _laid_out[rnn] = {}
        entries[(*key, dtype)] = entry
    return entry


def _sources(rnn: nn.LSTM, layer: int, suffix: str) -> tuple[torch.Tensor, ...]:
    name = f"_l{layer}{suffix}"
    return (getattr(rnn, "weight_ih" + name), getattr(rnn, "weight_hh" + name), getattr(rnn, "bias_ih" + name),
            getattr(rnn, "bias_hh" + name))


# The operator's Python binding costs less a call than torch.ops.aten's dispatch.
_python_binding = getattr(torch, "mkldnn_rnn_layer", None)


def _run(laid_out: _LaidOut, time_major: torch.Tensor, hidden_size: int) -> torch.Tensor:
    """``(T, B, H)`` outputs of one direction over ``time_major`` ``(T, B, D)``, in the number
    format of ``laid_out``'s weights."""
    time_major = time_major.to(laid_out.weight_ih.dtype).contiguous()
    zeros = time_major.new_zeros(time_major.shape[1], hidden_size)
    rnn_layer = _python_binding or torch.ops.aten.mkldnn_rnn_layer
    return rnn_layer(time_major, laid_out.weight_ih, laid_out.weight_hh, laid_out.bias_ih, laid_out.bias_hh, zeros, zeros,
                      False, [], LSTM_MODE, hidden_size, 1, True, False, False, False)[0]
