"""CRF decoding and training on the CPU (the compiled kernel, NumPy alone) give the PyTorch CRF's
answers, computed in float64: best paths, confidences, log partition and its gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from textorch.models import crf_compiled, crf_numpy
from textorch.models.crf import CRF
from textorch.models.crf_numpy import viterbi_with_confidence


def _random_crf(num_tags: int, seed: int) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(num_tags)
    with torch.no_grad():
        crf.transitions.normal_(0, 2)
        crf.start_transitions.normal_()
        crf.end_transitions.normal_()
    return crf


@pytest.fixture(params=["compiled", "numpy"])
def crf_decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once with the compiled CRF decoder (Numba, a dependency: it must be there)
    and once with NumPy alone, the decoder of installs without Numba."""
    monkeypatch.delenv(crf_compiled.DISABLE_ENV, raising=False)
    if request.param == "numpy":
        monkeypatch.setattr(crf_numpy, "current_decoder", lambda: None)
    else:
        crf_compiled.compiled_decoder.cache_clear()
        assert crf_compiled.compiled_decoder() is not None, "numba is installed with textorch and must compile the CRF"
    return request.param


@pytest.mark.parametrize("batch,length,tags", [(1, 1, 5), (1, 6, 9), (7, 13, 11), (32, 40, 17)])
def test_cpu_crf_decoders_equal_torch_crf(batch: int, length: int, tags: int, crf_decoder: str) -> None:
    crf = _random_crf(tags, seed=batch + length)
    emissions = torch.randn(batch, length, tags, dtype=torch.float64) * 3
    lengths = torch.randint(1, length + 1, (batch,))
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, _ = crf.decode(emissions, mask)
        marginals = crf.marginals(emissions, mask)
    expected_scores = marginals.gather(-1, expected_paths.unsqueeze(-1)).squeeze(-1)
    paths, scores = viterbi_with_confidence(emissions.numpy(), lengths.numpy(), crf.transitions.detach().numpy(),
                                            crf.start_transitions.detach().numpy(), crf.end_transitions.detach().numpy())
    assert np.array_equal(paths, expected_paths.numpy())
    assert np.allclose(scores, expected_scores.numpy(), atol=1e-6)
    assert (scores[~mask.numpy()] == 0).all() and (scores[mask.numpy()] > 0).all()


def test_cpu_crf_decoders_agree_on_a_ragged_batch_and_each_row_alone(crf_decoder: str) -> None:
    """A ragged batch long enough to cross many renormalisations, against the PyTorch CRF;
    each row decoded alone (cut to its length) equals its row in the batch; labels only gives
    the same paths."""
    crf = _random_crf(7, seed=21)
    emissions = torch.randn(4, 23, 7, dtype=torch.float64) * 3
    lengths = torch.tensor([23, 1, 9, 16])
    mask = torch.arange(23)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, _ = crf.decode(emissions, mask)
        expected = crf.marginals(emissions, mask).gather(-1, expected_paths.unsqueeze(-1)).squeeze(-1)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    paths, scores = viterbi_with_confidence(emissions.numpy(), lengths.numpy(), *params)
    assert np.array_equal(paths, expected_paths.numpy())
    assert np.allclose(scores, expected.numpy(), atol=1e-6)
    for row, n in enumerate(lengths.tolist()):
        one_paths, one_scores = viterbi_with_confidence(emissions[row:row + 1, :n].numpy(), lengths[row:row + 1].numpy(),
                                                        *params)
        assert np.array_equal(one_paths[0], paths[row, :n]) and np.allclose(one_scores[0], scores[row, :n], atol=1e-6)
    for rows in (slice(None), slice(0, 1)):
        bare_paths, none = viterbi_with_confidence(emissions[rows].numpy(), lengths[rows].numpy(), *params,
                                                   with_confidence=False)
        assert none is None and np.array_equal(bare_paths, paths[rows])


def test_cpu_crf_decoders_agree_with_each_other_on_real_sized_batches() -> None:
    """The compiled kernel and NumPy, on batches shaped like tagging's (CoNLL-2003 at batch 32,
    GROBID headers: long rows, more tags), float32 emissions as the network gives them."""
    rng = np.random.default_rng(3)
    kernel = crf_compiled.compiled_decoder()
    assert kernel is not None
    for batch, length, tags in ((32, 14, 9), (5, 159, 13), (1, 15, 9)):
        params = [rng.normal(size=size) for size in ((tags, tags), tags, tags)]
        emissions = (rng.normal(size=(batch, length, tags)) * 3).astype(np.float32)
        lengths = rng.integers(1, length + 1, batch)
        lengths[0] = length
        compiled = viterbi_with_confidence(emissions, lengths, *params)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(crf_numpy, "current_decoder", lambda: None)
            plain = viterbi_with_confidence(emissions, lengths, *params)
        assert np.array_equal(compiled[0], plain[0])
        assert np.allclose(compiled[1], plain[1], atol=1e-6) and compiled[1].dtype == np.float32
        # Any layout the kernel was not compiled for is converted, never misread: a strided view,
        # Fortran order, int32 lengths, read-only parameters.
        strided = np.repeat(emissions, 2, axis=1)[:, ::2]
        fortran = [np.asfortranarray(params[0]), *params[1:]]
        for p in fortran:
            p.setflags(write=False)
        odd = viterbi_with_confidence(strided, lengths.astype(np.int32), *fortran)
        assert not strided.flags.c_contiguous and np.array_equal(odd[0], compiled[0])
        assert np.allclose(odd[1], compiled[1], atol=1e-6)


def test_compiled_crf_kernel_source_runs_as_python_with_the_same_results() -> None:
    """The kernel's loops, uncompiled (how one would step through them in a debugger), give
    what the compiled kernel gives."""
    rng = np.random.default_rng(4)
    params = [rng.normal(size=size) for size in ((4, 4), 4, 4)]
    emissions, lengths = rng.normal(size=(3, 5, 4)) * 2, np.array([5, 1, 3])
    compiled = crf_compiled.decode(crf_compiled.compiled_decoder(), emissions, lengths, *params, True)
    python = crf_compiled.decode(crf_compiled._decode_rows, emissions, lengths, *params, True)
    assert np.array_equal(compiled[0], python[0]) and np.allclose(compiled[1], python[1], atol=1e-7)
    assert not compiled[2].any() and not python[2].any()


def test_compiled_crf_decoder_loads_once_numpy_decoding_has_cost_as_much(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ski-rental rule: NumPy decodes (its time counted) until it has cost
    ``LOAD_AFTER_NUMPY_S`` and at least ``MIN_SHARE`` of the tagging time; the next call then
    loads the compiled decoder."""
    monkeypatch.delenv(crf_compiled.DISABLE_ENV, raising=False)
    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.setattr(crf_compiled, "_numpy_seconds", 0.0)
    monkeypatch.setattr(crf_compiled, "_tagging_seconds", 0.0)
    monkeypatch.setattr(crf_compiled, "LOAD_AFTER_NUMPY_S", 3600.0)
    rng = np.random.default_rng(1)
    params = [rng.normal(size=size) for size in ((5, 5), 5, 5)]
    emissions, lengths = rng.normal(size=(3, 6, 5)), np.array([6, 2, 4])
    first = viterbi_with_confidence(emissions, lengths, *params)
    assert crf_compiled.compiled_decoder.cache_info().currsize == 0 and crf_compiled._numpy_seconds > 0
    monkeypatch.setattr(crf_compiled, "LOAD_AFTER_NUMPY_S", crf_compiled._numpy_seconds)
    # ... but the calls around it (a transformer encoder, say) took 100 times longer: not yet
    crf_compiled.tagging_time_spent(100 * crf_compiled._numpy_seconds)
    viterbi_with_confidence(emissions, lengths, *params)
    assert crf_compiled.compiled_decoder.cache_info().currsize == 0
    monkeypatch.setattr(crf_compiled, "_tagging_seconds", 0.0)
    second = viterbi_with_confidence(emissions, lengths, *params)
    assert crf_compiled.compiled_decoder.cache_info().currsize == 1 and crf_compiled.compiled_decoder() is not None
    assert np.array_equal(first[0], second[0]) and np.allclose(first[1], second[1], atol=1e-6)


def test_numpy_viterbi_breaks_ties_towards_the_first_tag(crf_decoder: str) -> None:
    """Whole-number scores tie everywhere: both decoders, on a batch and on each row alone,
    keep the lowest-numbered previous tag, as the brute-force search below does."""
    rng = np.random.default_rng(5)
    tags, length = 3, 4
    trans, start, end = (rng.integers(0, 2, size).astype(np.float64) for size in ((tags, tags), tags, tags))
    emissions = rng.integers(0, 2, (6, length, tags)).astype(np.float64)
    lengths = np.array([4, 4, 2, 1, 3, 4])

    def first_best(em: np.ndarray, n: int) -> list[int]:
        # Viterbi by hand, ties to the lowest previous tag, then the lowest last tag
        score, back = start + em[0], []
        for t in range(1, n):
            candidates = score[:, None] + trans
            back.append(candidates.argmax(axis=0))
            score = candidates.max(axis=0) + em[t]
        path = [int((score + end).argmax())]
        for pointers in reversed(back):
            path.append(int(pointers[path[-1]]))
        return path[::-1] + [0] * (length - n)

    expected = [first_best(em, n) for em, n in zip(emissions, lengths)]
    paths, _ = viterbi_with_confidence(emissions, lengths, trans, start, end)
    assert paths.tolist() == expected
    for row in range(len(lengths)):
        one, _ = viterbi_with_confidence(emissions[row:row + 1, : lengths[row]], lengths[row:row + 1],
                                         trans, start, end, with_confidence=False)
        assert one[0].tolist() == expected[row][: lengths[row]]


def test_cpu_crf_decoders_ignore_padding_values(crf_decoder: str) -> None:
    crf = _random_crf(6, seed=3)
    emissions = np.random.default_rng(0).normal(size=(3, 8, 6)).astype(np.float32)
    lengths = np.array([8, 3, 5])
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    paths, scores = viterbi_with_confidence(emissions, lengths, *params)
    noisy = emissions.copy()
    for row, n in enumerate(lengths):
        noisy[row, n:] = np.nan if row == 1 else 1e6
    noisy_paths, noisy_scores = viterbi_with_confidence(noisy, lengths, *params)
    assert np.array_equal(paths, noisy_paths) and np.array_equal(scores, noisy_scores)


def test_compiled_crf_decoder_can_be_switched_off_and_falls_back_on_failure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """``TEXTORCH_DISABLE_NUMBA=1`` and a Numba that fails to compile both leave NumPy decoding
    (a warning for the failure), never a failed tagging call; a Numba that cannot cache
    compiles without caching."""
    import numba

    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.setenv(crf_compiled.DISABLE_ENV, "1")
    assert crf_compiled.compiled_decoder() is None
    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.delenv(crf_compiled.DISABLE_ENV)

    # No writable cache location (Numba refuses ``cache=True``): compiled without its cache.
    real_njit = numba.njit

    def no_cache(*args, **kwargs):
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real_njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache)
    kernel = crf_compiled.compiled_decoder()
    assert kernel is not None
    paths, _, failed = crf_compiled.decode(kernel, np.array([[[0.0, 1.0], [2.0, 0.0]]]), np.array([2]),
                                           np.zeros((2, 2)), np.zeros(2), np.zeros(2), True)
    assert paths.tolist() == [[1, 0]] and not failed.any()
    crf_compiled.compiled_decoder.cache_clear()

    def broken(*args, **kwargs):
        raise RuntimeError("no LLVM here")

    monkeypatch.setattr(numba, "njit", broken)
    with caplog.at_level("WARNING", logger="textorch.models.crf_compiled"):
        assert crf_compiled.compiled_decoder() is None
    assert "no LLVM here" in caplog.text
    _assert_crf_head_decodes_as_torch_crf(seed=2)
    crf_compiled.compiled_decoder.cache_clear()
    monkeypatch.undo()
    assert crf_compiled.compiled_decoder() is not None


def test_crf_head_uses_the_numpy_path_only_without_gradients() -> None:
    _assert_crf_head_decodes_as_torch_crf(seed=5)


def _assert_crf_head_decodes_as_torch_crf(seed: int) -> None:
    """The CRF head's CPU decoding (compiled or NumPy) against the PyTorch CRF's own Viterbi."""
    crf = _random_crf(4, seed=seed)
    emissions = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        paths, scores = crf.best_paths_with_confidence(emissions, mask)
        reference, _ = crf.decode(emissions, mask)
    assert torch.equal(paths, reference)
    assert scores.shape == (2, 5) and float(scores[1, 2:].abs().sum()) == 0.0


def test_cpu_crf_decoders_survive_extreme_scores(crf_decoder: str) -> None:
    """Emission gaps of thousands underflow the scaled recursion; the log-space one takes over
    (for the compiled decoder: for the rows that underflowed)."""
    crf = _random_crf(3, seed=9)
    extreme = [[0.0, -3000.0, -3000.0], [-3000.0, 0.0, -6000.0], [0.0, 0.0, -3000.0]]
    emissions = np.array([extreme, [[0.5, -1.0, 0.2], [0.1, 0.3, -0.4], [9.0, 9.0, 9.0]]])  # row 1: 2 tokens
    lengths = np.array([3, 2])
    mask = torch.from_numpy(np.arange(3)[None, :] < lengths[:, None])
    with torch.no_grad():
        crf.transitions.fill_(0.0)
        crf.transitions[0, 1] = -4000.0
        reference = crf.marginals(torch.from_numpy(emissions), mask)
        expected, _ = crf.decode(torch.from_numpy(emissions), mask)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    if crf_decoder == "compiled":  # the kernel gives up on the extreme row only
        failed = crf_compiled.decode(crf_compiled.compiled_decoder(), emissions, lengths, *params, True)[2]
        assert failed.tolist() == [True, False]
    paths, scores = viterbi_with_confidence(emissions, lengths, *params)
    assert np.array_equal(paths, expected.numpy())
    assert np.isfinite(scores).all()
    assert np.allclose(scores, reference.gather(-1, expected.unsqueeze(-1)).squeeze(-1).numpy(), atol=1e-6)


def test_log_space_fallback_equals_torch_crf() -> None:
    from textorch.models.crf_numpy import _log_space_confidence

    crf = _random_crf(7, seed=11)
    emissions = torch.randn(5, 9, 7, dtype=torch.float64) * 4
    lengths = torch.tensor([9, 3, 1, 7, 9])
    mask = torch.arange(9)[None, :] < lengths[:, None]
    with torch.no_grad():
        paths, _ = crf.decode(emissions, mask)
        expected = crf.marginals(emissions, mask).gather(-1, paths.unsqueeze(-1)).squeeze(-1)
    params = [p.detach().numpy().astype(np.float64) for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    got = _log_space_confidence(emissions.numpy(), mask.numpy(), True, paths.numpy(), *params)
    assert np.allclose(got, expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("batch,length,tags", [(1, 1, 3), (3, 7, 5), (8, 30, 9)])
def test_numpy_log_partition_gives_the_torch_crf_loss_and_gradients(
    batch: int, length: int, tags: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training on the CPU takes log Z and its gradient from crf_numpy.log_partition; the
    log-space autograd loop of the CRF is the reference."""
    crf = _random_crf(tags, seed=batch * 7 + length)
    generator = torch.Generator().manual_seed(length)
    emissions = (torch.randn(batch, length, tags, dtype=torch.float64, generator=generator) * 3).requires_grad_()
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    gold = torch.randint(0, tags, (batch, length), generator=generator)
    weights = torch.rand(batch, dtype=torch.float64, generator=generator)

    def loss_and_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
        emissions.grad = None
        crf.zero_grad()
        loss = crf.neg_log_likelihood(emissions, gold, mask)
        (loss * weights).sum().backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in crf.parameters()]  # unused: none
        return loss.detach(), [emissions.grad.clone()] + grads

    loss, grads = loss_and_grads()
    monkeypatch.setattr(CRF, "_log_partition_numpy", staticmethod(lambda *args: None))
    expected_loss, expected_grads = loss_and_grads()
    assert torch.allclose(loss, expected_loss, atol=1e-9)
    for got, want in zip(grads, expected_grads):
        assert torch.allclose(got, want, atol=1e-9)
    assert float(grads[0][~mask].abs().sum()) == 0.0


def test_numpy_log_partition_declines_extreme_scores() -> None:
    from textorch.models.crf_numpy import log_partition

    crf = _random_crf(3, seed=9)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    extreme = np.array([[[0.0, -3000.0, -3000.0], [-3000.0, -3000.0, 0.0]]])
    params[0] = np.where(np.eye(3, dtype=bool), -5000.0, 0.0)  # staying on a tag is all but impossible
    assert log_partition(extreme, np.array([2]), *params) is not None
    params[0] = np.full((3, 3), -5000.0)
    params[0][0, 1] = 0.0  # the only likely step leads to an emission thousands below the best
    assert log_partition(extreme, np.array([2]), *params) is None
    emissions = torch.from_numpy(extreme).requires_grad_()
    with torch.no_grad():
        crf.transitions.copy_(torch.from_numpy(params[0]))
    loss = crf.neg_log_likelihood(emissions, torch.tensor([[0, 2]]), torch.ones(1, 2, dtype=torch.bool))
    loss.sum().backward()  # the log-space CRF took over
    assert torch.isfinite(loss).all() and torch.isfinite(emissions.grad).all()


def test_numpy_log_partition_declines_batches_too_large_for_its_step_matrices(monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.models import crf_numpy

    crf = _random_crf(4, seed=2)
    emissions = torch.randn(3, 10, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(3, 10, dtype=torch.bool)
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    assert crf_numpy.log_partition(emissions.detach().numpy(), np.full(3, 10), *params) is not None
    expected = crf.neg_log_likelihood(emissions, torch.zeros(3, 10, dtype=torch.long), mask)
    monkeypatch.setattr(crf_numpy, "TRAINING_CELLS", 3 * 10 * 4 * 4 - 1)
    assert crf_numpy.log_partition(emissions.detach().numpy(), np.full(3, 10), *params) is None
    got = crf.neg_log_likelihood(emissions, torch.zeros(3, 10, dtype=torch.long), mask)  # the log-space CRF
    assert torch.allclose(got, expected, atol=1e-9)


def test_cpu_crf_decoding_by_lengths_ignores_what_lies_past_them(crf_decoder: str) -> None:
    """The time-major path hands the CRF a strided view whose padded positions hold leftovers."""
    crf = _random_crf(5, seed=8)
    emissions = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(8))
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, expected_scores = crf.best_paths_with_confidence(emissions * mask.unsqueeze(-1), mask)
        leftovers = emissions.masked_fill(~mask.unsqueeze(-1), 1e4).transpose(0, 1).contiguous().transpose(0, 1)
        paths, scores = crf.cpu_best_paths(leftovers, lengths)
    assert torch.equal(paths[mask], expected_paths[mask])
    assert torch.allclose(scores[mask], expected_scores[mask], atol=1e-6)
    with pytest.raises(ValueError, match="one length per row"):
        crf.cpu_best_paths(emissions, lengths[:2])
