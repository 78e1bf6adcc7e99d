"""LSTM directions with weights laid out once for oneDNN: ``torch.lstm``'s outputs exactly, fresh weights
after any change, and the ordinary path wherever gradients, autocast, GRUs or export are involved."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from textorch.runtime.precision import cpu_has_native_bf16
from textorch.models import onednn_lstm, padded_rnn
from textorch.models.onednn_lstm import applies, lstm_direction, laid_out_lstm_available

needs_layout = pytest.mark.skipif(not laid_out_lstm_available(), reason="this torch build cannot lay out LSTM weights")
needs_bf16_layout = pytest.mark.skipif(
    not (cpu_has_native_bf16() and laid_out_lstm_available(torch.bfloat16)),
    reason="this CPU has no native bfloat16, or this torch cannot lay out bfloat16 LSTM weights")


def _lstm(input_size: int = 6, hidden: int = 5, layers: int = 1, seed: int = 0) -> nn.LSTM:
    torch.manual_seed(seed)
    return nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True, bidirectional=True).eval()


def _direction_by_torch(rnn: nn.LSTM, x: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    names = [f"{kind}_l{layer}{suffix}" for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    h0 = x.new_zeros(1, x.shape[0], rnn.hidden_size)
    return torch.lstm(x, (h0, h0), [getattr(rnn, n) for n in names], True, 1, 0.0, False, False, True)[0]


def _spy_reorders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count weight reorders (they still run)."""
    made: list[int] = []
    real = onednn_lstm._LaidOut.of.__func__

    def spy(cls, sources, hidden_size, dtype=torch.float32):
        made.append(1)
        return real(cls, sources, hidden_size, dtype)

    monkeypatch.setattr(onednn_lstm._LaidOut, "of", classmethod(spy))
    return made


@needs_layout
@pytest.mark.parametrize("rows, steps", [(1, 1), (1, 13), (7, 3), (33, 9)])
@pytest.mark.parametrize("suffix", ["", "_reverse"])
def test_a_direction_equals_torch_lstm(rows: int, steps: int, suffix: str) -> None:
    rnn = _lstm()
    x = torch.randn(rows, steps, 6, generator=torch.Generator().manual_seed(rows * steps))
    with torch.inference_mode():
        assert applies(rnn, x)
        got = lstm_direction(rnn, x, 0, suffix)
        expected = _direction_by_torch(rnn, x, 0, suffix)
    assert got.shape == (rows, steps, 5)
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)


@needs_layout
def test_unpadded_rows_give_the_fused_bidirectional_outputs_with_two_layers() -> None:
    rnn = _lstm(layers=2)
    x = torch.randn(3, 8, 6, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        got = padded_rnn.rnn_outputs(rnn, x, torch.full((3,), 8))
        expected = rnn(x)[0]
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)


def test_rows_without_padding_read_backwards_by_a_flip_with_the_modules_gradients() -> None:
    """Training batches of equal lengths reverse their rows with a flip instead of an index:
    outputs and gradients must be the fused module call's."""
    rnn = _lstm().train()
    x = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(5))
    expected = rnn(x)[0]
    (expected * torch.arange(10.0)).sum().backward()
    expected_grads = [p.grad.clone() for p in rnn.parameters()]
    rnn.zero_grad()
    got = padded_rnn.padded_rnn(rnn, x, torch.full((3,), 5))
    (got * torch.arange(10.0)).sum().backward()
    assert torch.allclose(got, expected, atol=1e-6, rtol=0)
    assert all(torch.allclose(p.grad, g, atol=1e-5) for p, g in zip(rnn.parameters(), expected_grads))


@needs_layout
def test_padded_rows_keep_their_values_and_zeros_after_each_length() -> None:
    rnn = _lstm()
    x = torch.randn(4, 6, 6, generator=torch.Generator().manual_seed(2))
    lengths = torch.tensor([6, 4, 2, 1])
    with torch.inference_mode():
        got = padded_rnn.rnn_outputs(rnn, x, lengths)
        for row, n in enumerate(lengths.tolist()):
            alone = rnn(x[row : row + 1, :n])[0][0]
            assert torch.allclose(got[row, :n], alone, atol=1e-6, rtol=0)
            assert not got[row, n:].any()


@needs_layout
def test_weights_are_reordered_once_then_again_after_any_change(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _spy_reorders(monkeypatch)
    rnn = _lstm()
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        first = lstm_direction(rnn, x, 0, "")
        assert torch.equal(lstm_direction(rnn, x, 0, ""), first)
    assert len(made) == 1
    other = _lstm(seed=1)
    rnn.load_state_dict(other.state_dict())  # in place: version counters move
    with torch.inference_mode():
        reloaded = lstm_direction(rnn, x, 0, "")
        assert torch.allclose(reloaded, _direction_by_torch(other, x, 0, ""), atol=1e-6, rtol=0)
    assert len(made) == 2
    rnn.bias_hh_l0 = nn.Parameter(torch.zeros_like(rnn.bias_hh_l0))  # a new object
    with torch.inference_mode():
        assert torch.allclose(lstm_direction(rnn, x, 0, ""), _direction_by_torch(rnn, x, 0, ""), atol=1e-6, rtol=0)
    assert len(made) == 3


@needs_layout
def test_the_model_keeps_its_names_state_and_copies() -> None:
    rnn = _lstm()
    names = set(rnn.state_dict())
    with torch.inference_mode():
        lstm_direction(rnn, torch.randn(1, 2, 6), 0, "")
    assert set(rnn.state_dict()) == names
    twin = copy.deepcopy(rnn)
    x = torch.randn(2, 3, 6)
    with torch.inference_mode():
        assert torch.equal(lstm_direction(twin, x, 0, ""), lstm_direction(rnn, x, 0, ""))


@needs_layout
def test_the_ordinary_path_wherever_packing_does_not_apply() -> None:
    rnn = _lstm()
    x = torch.randn(2, 3, 6)
    with torch.inference_mode():
        assert applies(rnn, x)
        assert not applies(rnn, x.double())
        assert not applies(rnn, x[:, :0])
        with torch.autocast("cpu", dtype=torch.float16):
            assert not applies(rnn, x)
        assert not applies(nn.GRU(6, 5, batch_first=True).eval(), x)
        assert not applies(nn.LSTM(6, 5, batch_first=True, bias=False).eval(), x)
        assert not applies(nn.LSTM(6, 5, batch_first=True, proj_size=2).eval(), x)
    assert not applies(rnn, x)  # gradients wanted: training keeps autograd's path
    assert not applies(copy.deepcopy(rnn).train(), x)



@needs_layout
def test_an_lstm_made_under_inference_mode_is_laid_out_and_sees_its_changes() -> None:
    """Inference tensors keep no version counter; the kept layout compares contents instead."""
    x = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(6))
    with torch.inference_mode():
        made_here = _lstm()
        assert applies(made_here, x)
        first = lstm_direction(made_here, x, 0, "")
        assert torch.allclose(first, _direction_by_torch(made_here, x, 0, ""), atol=1e-6, rtol=0)
        made_here.weight_ih_l0.mul_(-1.0)
        changed = lstm_direction(made_here, x, 0, "")
        assert not torch.allclose(changed, first)
        assert torch.allclose(changed, _direction_by_torch(made_here, x, 0, ""), atol=1e-6, rtol=0)


def test_the_probe_answers_under_inference_mode_and_without_the_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tagging calls run under inference mode, and the first one asks the probe: it must not
    build its test LSTM from inference tensors (which keep no version counter) and give up."""
    onednn_lstm.laid_out_lstm_available.cache_clear()
    try:
        random_state = torch.get_rng_state()
        with torch.inference_mode():
            found = laid_out_lstm_available()
            with torch.autocast("cpu", dtype=torch.bfloat16):  # --precision bf16's first call asks under autocast
                found_bf16 = laid_out_lstm_available(torch.bfloat16)
        assert torch.equal(torch.get_rng_state(), random_state)  # training's random draws stay the same
        assert found == (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_mkldnn_rnn_layer_weight"))
        if cpu_has_native_bf16():
            assert found_bf16 == found

        class NoOps:
            def __getattr__(self, name: str):
                raise AttributeError(name)

        onednn_lstm.laid_out_lstm_available.cache_clear()
        monkeypatch.setattr(torch.ops, "mkldnn", NoOps())
        assert laid_out_lstm_available() is False
        assert laid_out_lstm_available(torch.bfloat16) is False
        rnn = _lstm()
        with torch.inference_mode():
            assert not applies(rnn, torch.randn(1, 2, 6))
            out = padded_rnn.rnn_outputs(rnn, torch.randn(2, 3, 6), torch.tensor([3, 2]))
        assert out.shape == (2, 3, 10)
    finally:
        monkeypatch.undo()
        onednn_lstm.laid_out_lstm_available.cache_clear()


@needs_layout
def test_an_optimizer_step_is_seen_even_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused Adam step changes weights without moving their version counters: a tagger
    validated between training steps must not keep the weights of the step before."""
    made = _spy_reorders(monkeypatch)
    rnn = _lstm()
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(4))
    optimizer = torch.optim.Adam(rnn.parameters(), lr=0.1, fused=True)
    with torch.inference_mode():
        before = lstm_direction(rnn, x, 0, "")
    rnn.train()
    rnn(x)[0].sum().backward()
    optimizer.step()
    rnn.eval()
    with torch.inference_mode():
        after = lstm_direction(rnn, x, 0, "")
        expected = _direction_by_torch(rnn, x, 0, "")
    assert len(made) == 2
    assert not torch.allclose(after, before)
    assert torch.allclose(after, expected, atol=1e-6, rtol=0)


@needs_layout
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("lengths", [[4, 4, 4], [9, 1, 4, 7, 2, 9, 3, 3, 5, 8, 6, 1, 2, 2, 4, 7, 9, 1, 5]])
def test_final_states_at_inference_equal_the_packed_ones(bidirectional: bool, lengths: list[int]) -> None:
    """Character-encoder final states at CPU inference, laid-out weights (no padding: a flip;
    unsorted padded rows, 19 run as a bucket of 20): ``h_n`` of the packed LSTM, each direction's."""
    torch.manual_seed(3)
    rnn = nn.LSTM(6, 5, batch_first=True, bidirectional=bidirectional).eval()
    lengths_t = torch.tensor(lengths)
    x = torch.randn(len(lengths), max(lengths), 6, generator=torch.Generator().manual_seed(len(lengths)))
    with torch.inference_mode():
        got = padded_rnn.final_states(rnn, x, lengths_t)
        _, (h_n, _) = rnn(nn.utils.rnn.pack_padded_sequence(x, lengths_t, batch_first=True, enforce_sorted=False))
    assert torch.allclose(got, torch.cat(list(h_n), dim=-1), atol=1e-6, rtol=0)


BF16_TOLERANCE = 3e-2
"""bfloat16 keeps 8 bits of mantissa: outputs of these small LSTMs (values within +-1) agree
with float32 and with autocast's ``torch.lstm`` to a few thousandths; a misplaced weight or bias
is off by tenths."""


@needs_bf16_layout
@pytest.mark.parametrize("suffix", ["", "_reverse"])
def test_a_bf16_direction_equals_autocasts_torch_lstm(suffix: str) -> None:
    rnn = _lstm(input_size=40, hidden=30)
    x = torch.randn(9, 7, 40, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert onednn_lstm.run_dtype(rnn, x) == torch.bfloat16
        assert onednn_lstm.run_dtype(rnn, x.bfloat16()) == torch.bfloat16
        got = lstm_direction(rnn, x, 0, suffix)
        expected = _direction_by_torch(rnn, x, 0, suffix)
    with torch.inference_mode():
        exact = _direction_by_torch(rnn, x, 0, suffix)
    assert got.dtype == torch.bfloat16 and got.shape == (9, 7, 30)
    assert torch.allclose(got.float(), expected.float(), atol=BF16_TOLERANCE, rtol=0)
    assert torch.allclose(got.float(), exact, atol=BF16_TOLERANCE, rtol=0)


@needs_bf16_layout
def test_bf16_and_fp32_weights_are_kept_side_by_side_and_remade_after_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _spy_reorders(monkeypatch)
    rnn = _lstm()
    x = torch.randn(3, 5, 6, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm_direction(rnn, x, 0, "")
        fp32 = lstm_direction(rnn, x, 0, "")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm_direction(rnn, x, 0, "")
        assert torch.equal(lstm_direction(rnn, x, 0, ""), fp32)
        assert len(made) == 2  # one layout per format, each made once
        assert {key[-1] for key in onednn_lstm._laid_out[rnn]} == {torch.float32, torch.bfloat16}
        assert onednn_lstm._laid_out[rnn][(0, "", torch.bfloat16)].weight_ih.dtype == torch.bfloat16
        assert torch.allclose(fp32, _direction_by_torch(rnn, x, 0, ""), atol=1e-6, rtol=0)
    with torch.no_grad():
        rnn.weight_hh_l0.mul_(-1.0)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        changed = lstm_direction(rnn, x, 0, "")
        expected = _direction_by_torch(rnn, x, 0, "")
    assert len(made) == 3
    assert torch.allclose(changed.float(), expected.float(), atol=BF16_TOLERANCE, rtol=0)


def test_bf16_autocast_keeps_torch_lstm_where_the_cpu_would_emulate_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("textorch.runtime.precision.cpu_has_native_bf16", lambda: False)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert not applies(_lstm(), torch.randn(2, 3, 6))


@needs_bf16_layout
@pytest.mark.parametrize("lengths", [[9, 9, 9], [9, 9, 9, 9, 8, 8, 8, 8, 7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 4]])
def test_final_states_under_bf16_autocast_equal_the_ordinary_ones(lengths: list[int]) -> None:
    """The character BiLSTM of a ``--precision bf16`` tagging call: final states as autocast's
    ``torch.lstm`` gives them."""
    rnn = _lstm(input_size=12, hidden=8, seed=5)
    x = torch.randn(len(lengths), 9, 12, generator=torch.Generator().manual_seed(len(lengths)))
    lengths_t = torch.tensor(lengths)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        finals = padded_rnn.final_states(rnn, x, lengths_t)
    with torch.inference_mode():
        expected_finals = padded_rnn.final_states(rnn, x, lengths_t)
    assert torch.allclose(finals.float(), expected_finals, atol=BF16_TOLERANCE, rtol=0)


@needs_layout
def test_without_the_operators_tagging_runs_torch_lstm_with_the_same_outputs(
    tiny_conll, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The laid-out weights need PyTorch's private operators; switched off (as on a torch that
    lacks them), every route runs ``torch.lstm`` and answers as before, up to rounding."""
    from textorch.data.corpus import TokenSequence
    from textorch.tagging.training import train_sequence_labeler

    labeler = train_sequence_labeler(tiny_conll, max_epoch=2, seed=5, word_hidden=8, char_hidden=4)
    texts = [TokenSequence(t.split()) for t in ["John lives in Paris .", "Mary met Peter", "Rome", "Anna in Berlin"]]
    fast = [labeler.predict([t])[0] for t in texts] + labeler.predict(texts, batch_size=2)
    rnn = _lstm()
    x = torch.randn(3, 7, 6, generator=torch.Generator().manual_seed(9))
    lengths = torch.tensor([7, 5, 2])
    with torch.inference_mode():
        fast_outputs = padded_rnn.rnn_outputs(rnn, x, lengths)
    monkeypatch.setattr(onednn_lstm, "laid_out_lstm_available", lambda dtype=torch.float32: False)
    made = _spy_reorders(monkeypatch)
    labeler.token_vector_cache.clear()
    public = [labeler.predict([t])[0] for t in texts] + labeler.predict(texts, batch_size=2)
    with torch.inference_mode():
        assert not applies(rnn, x)
        public_outputs = padded_rnn.rnn_outputs(rnn, x, lengths)
    assert made == []
    assert torch.allclose(public_outputs, fast_outputs, atol=1e-6, rtol=0)
    assert [p.labels for p in public] == [p.labels for p in fast]
    assert torch.allclose(torch.tensor([s for p in public for s in p.scores]),
                          torch.tensor([s for p in fast for s in p.scores]), atol=1e-5, rtol=0)


def test_the_bf16_probe_says_no_without_its_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.runtime import precision

    precision.cpu_has_native_bf16.cache_clear()
    monkeypatch.setattr(precision, "mkldnn_op", lambda name: None)
    try:
        assert precision.cpu_has_native_bf16() is False
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            assert precision.onednn_inference_dtype(torch.zeros(2)) is None  # the public path then runs
    finally:
        monkeypatch.undo()
        precision.cpu_has_native_bf16.cache_clear()
