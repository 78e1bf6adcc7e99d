"""Which exporter writes which graph: the ``torch.export``-based one, except for the layers of
``LEGACY_LAYERS``, each of which has a test here asserting what the new exporter gets wrong
with it (the day one passes, its layer can leave the list and go to the new exporter)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from textorch.models.classifiers import DPCNN, Conv, MaxMeanPooling, Pool  # noqa: E402
from textorch.models.embedders import CharCNNEmbedder  # noqa: E402
from textorch.models.export_layers import CharCNN, PaddedBiRNN  # noqa: E402
from textorch.models.padded_rnn import rnn_final_states, rnn_outputs  # noqa: E402
from textorch.onnx import exporter  # noqa: E402
from textorch.onnx.exporter import OpsetNotKept, write_graph, write_new_graph  # noqa: E402
from textorch.onnx.legacy_export import LEGACY_LAYERS, OLDEST_NEW_OPSET, legacy_reason  # noqa: E402

OPSET = 17
AXES = {"x": {0: "batch", 1: "length"}, "mask": {0: "batch", 1: "length"}, "y": {0: "batch"}}


class _Layer(nn.Module):
    """A classifier layer alone, on ``x`` (B, T, 4) and ``mask`` (B, T)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = self.layer(x, mask.bool())
        return out[0] if isinstance(out, tuple) else out


def _inputs() -> dict[str, torch.Tensor]:
    return {"x": torch.randn(2, 5, 4), "mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])}


def _write_new(module: nn.Module, path: Path, inputs: dict | None = None, axes: dict | None = None) -> None:
    write_new_graph(module.eval(), inputs or _inputs(), ["y"], axes or AXES, path, OPSET)


class _Chars(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.chars = CharCNN(CharCNNEmbedder(10, char_dim=4, filters=3))

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        return self.chars(char_ids)


def test_the_new_exporter_writes_a_max_over_characters_at_opset_18_only(tmp_path: Path) -> None:
    char_ids = torch.tensor([[[2, 3, 0], [4, 0, 0]]])
    with pytest.raises(OpsetNotKept, match="opset 18, not 17"):
        _write_new(_Chars(), tmp_path / "m.onnx", {"char_ids": char_ids}, {"char_ids": {0: "batch", 1: "length"}})


@pytest.mark.parametrize("layer", [MaxMeanPooling(4), Conv(4, 3, 2)], ids=["max-pooling", "same-padding"])
def test_the_new_exporter_writes_max_pooling_and_padding_at_opset_18_only(tmp_path: Path, layer: nn.Module) -> None:
    with pytest.raises(OpsetNotKept, match="opset 18, not 17"):
        _write_new(_Layer(layer), tmp_path / "m.onnx")


@pytest.mark.parametrize("layer", [Pool(4, 2), DPCNN(4, 3, blocks=1)], ids=["pool", "dpcnn"])
def test_the_new_exporter_fixes_the_length_of_ceil_mode_pooling(tmp_path: Path, layer: nn.Module) -> None:
    with pytest.raises(Exception, match="inferred a static shape of 5"):
        _write_new(_Layer(layer), tmp_path / "m.onnx")


def test_each_legacy_layer_has_its_reason_and_its_test() -> None:
    assert set(LEGACY_LAYERS) == {CharCNN, MaxMeanPooling, Conv, Pool, DPCNN}  # the five tests above
    assert all(len(reason) > 40 for reason in LEGACY_LAYERS.values())
    assert legacy_reason(_Layer(MaxMeanPooling(4)), OPSET).startswith("MaxMeanPooling: ")
    birnn = PaddedBiRNN(nn.LSTM(4, 3, batch_first=True, bidirectional=True))
    assert legacy_reason(birnn, OPSET) is None
    assert legacy_reason(birnn, OLDEST_NEW_OPSET - 1).startswith(f"opset {OLDEST_NEW_OPSET - 1}: ")


class _Steps(nn.Module):
    """Reads the length axis's size, as DeLFT's graph does (its mask from the character ids)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        steps = torch.arange(x.shape[1]).unsqueeze(0)
        return x * (steps < mask.sum(dim=1, keepdim=True)).unsqueeze(-1)


def test_the_new_exporter_cannot_write_the_size_of_an_axis_below_opset_15(tmp_path: Path) -> None:
    with pytest.raises(OpsetNotKept, match=f"not {OLDEST_NEW_OPSET - 1}"):
        write_new_graph(_Steps(), _inputs(), ["y"], AXES, tmp_path / "m.onnx", OLDEST_NEW_OPSET - 1)
    write_new_graph(_Steps(), _inputs(), ["y"], AXES, tmp_path / "m.onnx", OLDEST_NEW_OPSET)


class _BiRNN(nn.Module):
    """Outputs and final states of a padded bidirectional RNN, as the export computes them."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn = PaddedBiRNN(rnn)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = mask.sum(dim=1)
        return self.rnn(x, lengths) * mask.unsqueeze(-1), self.rnn.final_states(x, lengths)


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_a_bidirectional_rnn_is_one_native_node_equal_to_pytorch_on_other_shapes(tmp_path: Path, monkeypatch,
                                                                               cell: type) -> None:
    """Written by the new exporter (never the deprecated one) as one node a call, whose outputs equal
    the packed RNN's on a batch and lengths other than the example's."""
    import onnx
    import onnxruntime

    def refused(*args: object) -> None:
        raise AssertionError("the TorchScript exporter was used")

    monkeypatch.setenv(exporter.EXPORTER_VARIABLE, "torch.export")
    monkeypatch.setattr(exporter, "write_legacy_graph", refused)
    torch.manual_seed(0)
    rnn = cell(4, 3, batch_first=True, bidirectional=True).eval()
    path = tmp_path / "rnn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        write_graph(_BiRNN(rnn).eval(), _inputs(), ["outputs", "final"],
                    {**AXES, "outputs": {0: "batch", 1: "length"}, "final": {0: "batch"}}, path, OPSET)
    graph = onnx.load(str(path))
    assert [n.op_type for n in graph.graph.node].count(cell.__name__) == 2  # one per call: outputs, final states
    assert [o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")] == [OPSET]
    assert [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.graph.input] == [
        ["batch", "length", 4], ["batch", "length"]]
    x = torch.randn(3, 7, 4)
    lengths = torch.tensor([7, 2, 5])
    mask = (torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)).long()
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs, final = session.run(None, {"x": x.numpy(), "mask": mask.numpy()})
    with torch.inference_mode():
        expected_outputs = rnn_outputs(rnn, x, lengths) * mask.unsqueeze(-1)
        expected_final = rnn_final_states(rnn, x, lengths)
    np.testing.assert_allclose(outputs, expected_outputs.numpy(), atol=1e-5)
    np.testing.assert_allclose(final, expected_final.numpy(), atol=1e-5)


def test_the_torchscript_exporter_writes_by_default_and_the_new_one_takes_over_where_it_is_gone(
        tmp_path: Path, monkeypatch) -> None:
    """By default (the new exporter is over ten times slower a graph) the TorchScript exporter
    writes every graph; a PyTorch without it (``dynamo=False`` refused) gets the new one."""
    used: list[str] = []
    real_new = exporter.write_new_graph
    monkeypatch.delenv(exporter.EXPORTER_VARIABLE, raising=False)
    monkeypatch.setattr(exporter, "write_new_graph", lambda *a: used.append("torch.export") or real_new(*a))
    real_legacy = exporter.write_legacy_graph
    monkeypatch.setattr(exporter, "write_legacy_graph", lambda *a: used.append("torchscript") or real_legacy(*a))
    write_graph(_Steps(), _inputs(), ["y"], AXES, tmp_path / "a.onnx", OPSET)
    assert used == ["torchscript"]

    def gone(*args: object) -> None:
        raise NotImplementedError("the TorchScript-based exporter was removed")

    used.clear()
    monkeypatch.setattr(exporter, "write_legacy_graph", gone)
    write_graph(_Steps(), _inputs(), ["y"], AXES, tmp_path / "b.onnx", OPSET)
    assert used == ["torch.export"] and (tmp_path / "b.onnx").stat().st_size > 0


def test_an_unknown_exporter_is_refused_with_the_variable_named(tmp_path: Path, monkeypatch) -> None:
    from textorch.errors import ConfigError

    monkeypatch.setenv(exporter.EXPORTER_VARIABLE, "dynamo")
    with pytest.raises(ConfigError, match="TEXTORCH_ONNX_EXPORTER='dynamo': use one of torchscript, torch.export"):
        write_graph(_Steps(), _inputs(), ["y"], AXES, tmp_path / "a.onnx", OPSET)
    assert not (tmp_path / "a.onnx").exists()
