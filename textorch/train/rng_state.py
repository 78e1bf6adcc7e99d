"""Every random-number state of a process (torch, CUDA, NumPy, Python), saved and restored.

A checkpoint keeps each process's states so that a resumed run draws the same dropout masks
and batch orders as the run it continues; kept apart from the checkpoint files' handling.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture_rng(device: torch.device) -> dict[str, Any]:
    """This process's random-number states, as tensors and plain values."""
    _, keys, pos, has_gauss, cached = np.random.get_state()
    version, python_state, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "numpy_pos": int(pos),
        "numpy_has_gauss": int(has_gauss),
        "numpy_gauss": float(cached),
        "python_version": int(version),
        "python_state": torch.tensor(python_state, dtype=torch.int64),
        "python_gauss": gauss_next,
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    keys = state["numpy_keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, state["numpy_pos"], state["numpy_has_gauss"], state["numpy_gauss"]))
    random.setstate((state["python_version"], tuple(int(v) for v in state["python_state"].tolist()), state["python_gauss"]))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)
