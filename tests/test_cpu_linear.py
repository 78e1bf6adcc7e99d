"""Dense layers through oneDNN at inference: the same numbers as ``F.linear``, only where no
gradient, autocast or export is involved, and saved models unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from textorch.models import cpu_linear
from textorch.models.cpu_linear import CpuLinear, TanhDense, linear, onednn_linear_available, use_onednn_linears

needs_onednn = pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN dense layer")


def _large_input(rows: int = 64, features: int = 200) -> torch.Tensor:
    return torch.randn(2, rows, features, generator=torch.Generator().manual_seed(0))


def _calls_onednn(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Record every call of the oneDNN operator (it still runs)."""
    calls: list[tuple] = []
    real = cpu_linear._takes_onednn

    def spy(x: torch.Tensor, weight: torch.Tensor) -> bool:
        taken = real(x, weight)
        calls.append((tuple(x.shape), taken))
        return taken

    monkeypatch.setattr(cpu_linear, "_takes_onednn", spy)
    return calls


@needs_onednn
@pytest.mark.parametrize("activation", ["none", "tanh", "relu"])
def test_linear_equals_f_linear_with_its_activation(activation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _calls_onednn(monkeypatch)
    layer = nn.Linear(200, 100)
    x = _large_input()
    expected = F.linear(x, layer.weight, layer.bias)
    expected = {"none": expected, "tanh": torch.tanh(expected), "relu": torch.relu(expected)}[activation]
    with torch.inference_mode():
        got = linear(x, layer.weight, layer.bias, activation)
    assert calls == [((2, 64, 200), True)]
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5)
    with torch.no_grad():  # no bias, a non-contiguous input
        transposed = x.transpose(0, 1)
        assert torch.allclose(linear(transposed, layer.weight, None), F.linear(transposed, layer.weight), atol=1e-5)


def test_unknown_activation_is_refused() -> None:
    with pytest.raises(ValueError, match="activation must be one of"):
        linear(torch.zeros(1, 2), torch.zeros(3, 2), None, "gelu")


@needs_onednn
def test_ordinary_path_where_gradients_autocast_small_products_or_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = nn.Linear(200, 100)
    x = _large_input()
    assert cpu_linear._takes_onednn(x.detach(), layer.weight.detach())
    # Training: the weights need their gradient, and get it.
    assert not cpu_linear._takes_onednn(x, layer.weight)
    out = linear(x, layer.weight, layer.bias, "tanh")
    out.sum().backward()
    assert layer.weight.grad is not None and float(layer.weight.grad.abs().sum()) > 0
    with torch.no_grad():
        assert not cpu_linear._takes_onednn(torch.randn(4, 200), layer.weight)  # 80k multiply-adds: too small
        assert not cpu_linear._takes_onednn(x.double(), layer.weight.double())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not cpu_linear._takes_onednn(x, layer.weight)
    monkeypatch.setattr(torch.jit, "is_tracing", lambda: True)
    with torch.no_grad():
        assert not cpu_linear._takes_onednn(x, layer.weight)


@needs_onednn
def test_tanh_dense_keeps_the_plain_sequential_names_and_outputs() -> None:
    torch.manual_seed(3)
    plain = nn.Sequential(nn.Linear(200, 100), nn.Tanh(), nn.Linear(100, 9))
    dense = TanhDense(200, 100, 9)
    assert list(dense.state_dict()) == list(plain.state_dict())  # saved models load either way
    dense.load_state_dict(plain.state_dict())
    x = _large_input()
    with torch.inference_mode():
        assert torch.allclose(dense(x), plain(x), atol=1e-5)
    assert torch.allclose(dense(x), plain(x), atol=1e-6)  # training mode, with gradients: F.linear


@needs_onednn
def test_use_onednn_linears_swaps_plain_linears_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(4)
    encoder = nn.Sequential(nn.Linear(200, 128), nn.GELU(), nn.Sequential(nn.Linear(128, 200)), nn.LayerNorm(200))
    names = list(encoder.state_dict())
    parameters = [id(p) for p in encoder.parameters()]
    x = _large_input()
    with torch.no_grad():
        before = encoder(x)
    assert use_onednn_linears(encoder) is encoder
    assert type(encoder[0]) is CpuLinear and type(encoder[2][0]) is CpuLinear
    assert list(encoder.state_dict()) == names and [id(p) for p in encoder.parameters()] == parameters
    calls = _calls_onednn(monkeypatch)
    with torch.no_grad():
        assert torch.allclose(encoder(x), before, atol=1e-5)
    assert [taken for _, taken in calls] == [True, True]


def test_the_probe_falls_back_quietly_without_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoOps:
        def __getattr__(self, name: str):
            raise AttributeError(name)

    cpu_linear.onednn_linear_available.cache_clear()
    monkeypatch.setattr(torch.ops, "mkldnn", NoOps())
    try:
        assert cpu_linear.onednn_linear_available() is False
        layer = nn.Linear(200, 100)
        with torch.no_grad():
            x = _large_input()
            assert torch.allclose(linear(x, layer.weight, layer.bias, "tanh"), torch.tanh(layer(x)))
    finally:
        monkeypatch.undo()
        cpu_linear.onednn_linear_available.cache_clear()
