"""``being_captured``: True while tracing or exporting, and no import of ``torch.onnx`` to find out."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from textorch.models.graph_capture import being_captured
from textorch.onnx.exporter import write_graph


class _Recorder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(being_captured())
        return x * 2


def test_true_while_tracing_and_exporting_false_otherwise(tmp_path) -> None:
    pytest.importorskip("onnxscript")
    recorder = _Recorder()
    recorder(torch.ones(2))
    torch.jit.trace(recorder, torch.ones(2), check_trace=False)  # the check reruns it untraced
    write_graph(recorder, {"x": torch.ones(2)}, ["y"], {}, tmp_path / "m.onnx", 17)  # the exporter textorch uses
    recorder(torch.ones(2))
    assert recorder.seen[0] is False and recorder.seen[-1] is False
    assert any(recorder.seen[1:-1]) and all(recorder.seen[1:-1])


def test_tagging_never_imports_torch_onnx() -> None:
    """A process that only tags must not pay for importing ``torch.onnx`` (20-80 ms)."""
    script = (
        "import sys, torch\n"
        "from torch import nn\n"
        "from textorch.models import padded_rnn\n"
        "lstm = nn.LSTM(4, 3, batch_first=True, bidirectional=True).eval()\n"
        "with torch.inference_mode():\n"
        "    out = padded_rnn.rnn_outputs(lstm, torch.randn(2, 5, 4), torch.tensor([5, 3]))\n"
        "assert out.shape == (2, 5, 6)\n"
        "print('torch.onnx' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
