"""Opening and feeding an ONNX Runtime session, the one way both ONNX engines do it.

The ONNX engine of a loaded model (:mod:`textorch.onnx.engine`) and the tagger without PyTorch
(:mod:`textorch.tagging.onnx_tagger`) run the same exports, so they open them alike (the CPU
provider, the caller's thread count, nothing else set) and feed them alike (each input the graph
declares, by name, from what the call has). Imports NumPy alone (ONNX Runtime when a session is
opened), so that the tagger without PyTorch may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from textorch.errors import ModelFormatError


def open_session(model_file: Path, threads: int | None = None) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``model_file`` on the CPU provider, with
    ``threads`` intra-op threads (None or 0: ONNX Runtime's default). Raises ImportError without
    onnxruntime, and ONNX Runtime's own error for a graph it cannot load."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def input_names(session: Any) -> list[str]:
    """The names of the inputs ``session``'s graph declares, in its order."""
    return [i.name for i in session.get_inputs()]


def feed(names: list[str], available: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs named ``names`` (a graph's, :func:`input_names`) taken from ``available``, as
    arrays; CPU tensors are read in place (``np.asarray``). Raises :class:`ModelFormatError`
    naming every input the graph reads that ``available`` lacks (absent or None)."""
    missing = [name for name in names if available.get(name) is None]
    if missing:
        raise ModelFormatError(f"the ONNX graph reads {', '.join(sorted(missing))}, which this model's input lacks")
    return {name: np.asarray(available[name]) for name in names}
