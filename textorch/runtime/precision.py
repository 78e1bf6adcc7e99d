"""Number format of tagging and classification with the PyTorch engine: ``fp32`` or ``bf16``.

``fp32`` (the default) is exact. ``bf16`` runs the network under autocast: recurrent layers
and matrix products in bfloat16, everything numerically delicate (the CRF, softmax, scores)
still in float32. On a CPU with native bfloat16 (AVX512-BF16 or AMX) oneDNN's BiLSTM then
runs faster, more so with its weights laid out once in bfloat16
(:mod:`textorch.models.onednn_lstm`), with a handful of labels changed and the same F1. Small
batches lose, so they run in fp32 (``textorch.models.costs.BF16_MIN_ROWS``). Without native support oneDNN emulates
bfloat16, which is slower than fp32: we warn. Measurements: docs/performance.md.

The weights stay float32 in memory and in the model directory; nothing is converted.
"""

from __future__ import annotations

import contextlib
import functools
import logging

import torch

from textorch.errors import ConfigError
from textorch.runtime.onednn_ops import mkldnn_op

logger = logging.getLogger(__name__)

INFERENCE_PRECISIONS = ("fp32", "bf16")
def check_inference_precision(precision: str, device: torch.device | str = "cpu", engine: str = "torch") -> None:
    """Refuse what cannot run; warn where ``bf16`` will run slower than ``fp32``."""
    if precision not in INFERENCE_PRECISIONS:
        raise ConfigError(f"--precision must be one of {', '.join(INFERENCE_PRECISIONS)}, got {precision!r}")
    if precision == "fp32":
        return
    if engine == "onnx":
        raise ConfigError(f"--precision {precision} needs --engine torch (ONNX Runtime runs the exported fp32 "
                          "or int8 graph; see --quantized)")
    warn_without_native_bf16(device)


def warn_without_native_bf16(device: torch.device | str) -> None:
    """Tagging and training alike: bf16 on a CPU without it is slower than fp32, never wrong."""
    if torch.device(device).type == "cpu" and not cpu_has_native_bf16():
        logger.warning("this CPU has no native bfloat16 (AVX512-BF16 or AMX): --precision bf16 will be "
                       "emulated and run slower than fp32")


@functools.cache
def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX, as oneDNN sees it: where bfloat16 pays on this CPU. Asked once per
    process: every LSTM call under ``--precision bf16`` asks (``onednn_lstm``)."""
    probe = mkldnn_op("_is_mkldnn_bf16_supported")
    if probe is None:  # a torch built without oneDNN, or without this private probe
        return False
    try:
        return bool(probe())
    except (RuntimeError, TypeError):
        return False


def onednn_inference_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The number format a oneDNN inference shortcut (LSTM weights laid out once, fused dense
    layers) runs ``x`` in on the CPU: float32 for float32 input outside autocast; bfloat16 under
    bfloat16 autocast, for float32 or bfloat16 input, on a CPU that has it natively (emulated,
    bfloat16 runs slower than float32); None elsewhere, where PyTorch's ordinary path runs."""
    if not torch.is_autocast_enabled("cpu"):
        return torch.float32 if x.dtype == torch.float32 else None
    if (torch.get_autocast_dtype("cpu") == torch.bfloat16 and x.dtype in (torch.float32, torch.bfloat16)
            and cpu_has_native_bf16()):
        return torch.bfloat16
    return None


def inference_autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """The context a forward pass runs in for ``precision`` on ``device``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    raise ConfigError(f"precision must be one of {', '.join(INFERENCE_PRECISIONS)}, got {precision!r}")


def autocast_state(device: torch.device | str) -> tuple[bool, torch.dtype]:
    """Whether autocast is on for ``device``'s type, and to which dtype: what kept activations
    (:class:`textorch.models.token_vector_cache.TokenVectorCache`) must be keyed by."""
    kind = torch.device(device).type
    return torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)
