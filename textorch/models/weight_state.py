"""What a module's weights were when a value was computed from them: kept values (character
vectors of token types, LSTM weights in oneDNN's layout) are served only while it still holds.

PyTorch has no counter that every write moves: a write through ``p.data`` and a fused optimizer
step leave a parameter's version counter alone, and counting optimizer steps would mean a hook
on every optimizer of the process. So a snapshot keeps the parameter objects and a copy of
their bits, and compares contents: one pass over the weights at memory speed, far less than
recomputing what is kept. Bits, not values: ``-0.0`` against ``0.0`` or another NaN is a change.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import numpy as np
import torch

BYTES_COMPARED_AS_BYTES = 16384
"""Parameters up to this size compare as ``bytes`` (a copy and a memcmp: the least overhead per
call); larger ones with NumPy, which reads each side once and copies nothing."""

_SAME_SIZE_INTEGER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class _Kept:
    """One parameter: the object, where its values live, and a copy of its bits (bytes or a NumPy
    array on the CPU, a tensor on other devices)."""

    __slots__ = ("bits", "data_ptr", "dtype", "live", "param", "shape")

    def __init__(self, param: torch.Tensor) -> None:
        self.param = param  # held, so that its id cannot be given to another tensor
        self.data_ptr = param.data_ptr()
        self.shape = param.shape
        self.dtype = param.dtype
        live = _integer_view(param)
        on_cpu = live.device.type == "cpu"
        self.bits: bytes | np.ndarray | torch.Tensor
        if not on_cpu:
            self.bits = live.clone()
        elif live.numel() * live.element_size() <= BYTES_COMPARED_AS_BYTES:
            self.bits = live.numpy().tobytes()
        else:
            self.bits = live.numpy().copy()
        # A view that shares the parameter's memory, made once (None: a strided parameter,
        # whose contiguous copy must be made again at each check).
        self.live = None if not param.is_contiguous() else live.numpy() if on_cpu else live

    def matches(self, param: torch.Tensor) -> bool:
        if param is not self.param or param.data_ptr() != self.data_ptr:
            return False
        if param.shape != self.shape or param.dtype != self.dtype:
            return False
        live = self.live
        bits = self.bits
        if live is None:
            live = _integer_view(param)
            live = live if isinstance(bits, torch.Tensor) else live.numpy()
        if isinstance(bits, bytes):
            return live.tobytes() == bits
        if isinstance(bits, np.ndarray):
            return bool(np.array_equal(live, bits))
        return torch.equal(live, bits)


_checked_in_this_call: contextvars.ContextVar[set | None] = contextvars.ContextVar("textorch_checked", default=None)


@contextlib.contextmanager
def one_check_per_call() -> Iterator[None]:
    """Within this block (one tagging call, in this thread) each snapshot compares contents once:
    a call of many batches reads the same weights batch after batch, and nothing in the call
    writes them. Another thread writing weights during a call races with it either way."""
    token = _checked_in_this_call.set(set())
    try:
        yield
    finally:
        _checked_in_this_call.reset(token)


class WeightSnapshot:
    """The state of ``params`` now; :meth:`matches` tells whether the same tensors still hold
    exactly these bits."""

    __slots__ = ("_kept",)

    def __init__(self, params: tuple[torch.Tensor, ...]) -> None:
        self._kept = tuple(_Kept(p) for p in params)

    def matches(self, params: tuple[torch.Tensor, ...]) -> bool:
        kept = self._kept
        if len(params) != len(kept):
            return False
        checked = _checked_in_this_call.get()
        if checked is not None and self in checked:
            return all(k.param is p for k, p in zip(kept, params))
        same = all(k.matches(p) for k, p in zip(kept, params))
        if same and checked is not None:
            checked.add(self)
        return same


def _integer_view(param: torch.Tensor) -> torch.Tensor:
    """The parameter's values as integers of its element size (bytes for other sizes), contiguous."""
    tensor = param.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return tensor.view(_SAME_SIZE_INTEGER.get(tensor.element_size(), torch.uint8))
