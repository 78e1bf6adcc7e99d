"""Dense layers through oneDNN at inference: the same numbers as ``F.linear``, only where no
gradient, autocast or export is involved, and saved models unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from textorch.runtime import precision as inference_precision
from textorch.models import cpu_linear
from textorch.models.cpu_linear import CpuLinear, TanhDense, linear, onednn_linear_available, use_onednn_linears

needs_onednn = pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN dense layer")


def _large_input(rows: int = 64, features: int = 200) -> torch.Tensor:
    return torch.randn(2, rows, features, generator=torch.Generator().manual_seed(0))


def _calls_onednn(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Record every call of the oneDNN operator (it still runs)."""
    calls: list[tuple] = []
    real = cpu_linear._onednn_dtype

    def spy(x: torch.Tensor, weight: torch.Tensor) -> torch.dtype | None:
        dtype = real(x, weight)
        calls.append((tuple(x.shape), dtype is not None))
        return dtype

    monkeypatch.setattr(cpu_linear, "_onednn_dtype", spy)
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
def test_ordinary_path_where_gradients_small_products_or_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = nn.Linear(200, 100)
    x = _large_input()
    assert cpu_linear._onednn_dtype(x.detach(), layer.weight.detach()) == torch.float32
    # Training: the weights need their gradient, and get it.
    assert cpu_linear._onednn_dtype(x, layer.weight) is None
    out = linear(x, layer.weight, layer.bias, "tanh")
    out.sum().backward()
    assert layer.weight.grad is not None and float(layer.weight.grad.abs().sum()) > 0
    with torch.no_grad():
        assert cpu_linear._onednn_dtype(torch.randn(4, 200), layer.weight) is None  # 80k multiply-adds: too small
        assert cpu_linear._onednn_dtype(x.double(), layer.weight.double()) is None
        assert cpu_linear._onednn_dtype(x.bfloat16(), layer.weight) is None  # bfloat16 only under autocast
    monkeypatch.setattr(torch.jit, "is_tracing", lambda: True)
    with torch.no_grad():
        assert cpu_linear._onednn_dtype(x, layer.weight) is None


@needs_onednn
@pytest.mark.parametrize("native", [True, False])
def test_bf16_autocast_runs_the_product_in_bfloat16_only_where_the_cpu_has_it(
        native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``--precision bf16`` the product is oneDNN's in bfloat16 with the float32 weights cast
    per call, as autocast's own would be: the same dtype and values within bfloat16 rounding;
    where oneDNN would emulate bfloat16, autocast's ordinary path."""
    if native and not inference_precision.cpu_has_native_bf16():
        pytest.skip("this CPU has no native bfloat16: oneDNN's bfloat16 product may not exist here")
    monkeypatch.setattr(inference_precision, "cpu_has_native_bf16", lambda: native)
    calls = _calls_onednn(monkeypatch)
    layer = nn.Linear(200, 100)
    x = _large_input()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = torch.tanh(F.linear(x, layer.weight, layer.bias))
        got = linear(x, layer.weight, layer.bias, "tanh")
        assert (cpu_linear._onednn_dtype(x, layer.weight) == torch.bfloat16) == native
        with torch.autocast("cpu", dtype=torch.float16):
            assert cpu_linear._onednn_dtype(x, layer.weight) is None
    assert calls[0] == ((2, 64, 200), native)
    assert got.dtype == expected.dtype == torch.bfloat16
    exact = torch.tanh(F.linear(x, layer.weight, layer.bias))
    assert (got.float() - exact).abs().max() < 0.05 and (expected.float() - exact).abs().max() < 0.05


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
def test_use_onednn_linears_replaces_plain_linears_sharing_their_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(4)
    shared = nn.Linear(200, 200)
    encoder = nn.Sequential(nn.Linear(200, 128), nn.GELU(), nn.Sequential(nn.Linear(128, 200)), shared, shared)
    originals = [encoder[0], encoder[2][0], shared]
    names = list(encoder.state_dict())
    parameters = [id(p) for p in encoder.parameters()]
    x = _large_input()
    with torch.no_grad():
        before = encoder(x)
    assert use_onednn_linears(encoder) is encoder
    assert type(encoder[0]) is CpuLinear and type(encoder[2][0]) is CpuLinear and type(encoder[3]) is CpuLinear
    assert encoder[3] is encoder[4]  # one layer under two names: one replacement
    assert all(type(layer) is nn.Linear for layer in originals)  # the third-party objects keep their class
    assert list(encoder.state_dict()) == names and [id(p) for p in encoder.parameters()] == parameters
    calls = _calls_onednn(monkeypatch)
    with torch.no_grad():
        assert torch.allclose(encoder(x), before, atol=1e-5)
    assert [taken for _, taken in calls] == [True, True, True, True]


def test_use_onednn_linears_leaves_hooked_layers_and_replaces_a_lone_layer() -> None:
    hooked = nn.Linear(4, 3)
    hooked.register_forward_hook(lambda module, args, out: None)
    encoder = nn.Sequential(hooked)
    assert use_onednn_linears(encoder)[0] is hooked
    lone = nn.Linear(4, 3).eval()
    made = use_onednn_linears(lone)
    assert type(made) is CpuLinear and made.weight is lone.weight and made.bias is lone.bias
    assert not made.training and type(lone) is nn.Linear


@needs_onednn
@pytest.mark.parametrize("activation", ["none", "tanh", "relu"])
def test_without_the_operator_the_public_path_gives_the_same_products(
    activation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = nn.Linear(200, 100)
    x = _large_input()
    with torch.inference_mode():
        fast = linear(x, layer.weight, layer.bias, activation)
        monkeypatch.setattr(cpu_linear, "onednn_linear_available", lambda: False)
        calls = _calls_onednn(monkeypatch)
        public = linear(x, layer.weight, layer.bias, activation)
    assert calls == [(tuple(x.shape), False)]
    assert torch.allclose(public, fast, atol=1e-5, rtol=0)


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


@needs_onednn
def test_the_probe_finds_the_operator_when_first_asked_under_autocast() -> None:
    """A model's first tagging call may be a ``--precision bf16`` one: the probe must not compare
    oneDNN's float32 product with autocast's bfloat16 one and give up for the whole process."""
    cpu_linear.onednn_linear_available.cache_clear()
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            assert cpu_linear.onednn_linear_available() is True
    finally:
        cpu_linear.onednn_linear_available.cache_clear()
