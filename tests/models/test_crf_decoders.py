"""The CPU's one CRF decoder (:mod:`textorch.models.cpu_decoder`: the compiled kernel, and the NumPy
log-space recursions that stand in where Numba is missing) gives the PyTorch CRF's answers,
computed in float64: best paths, confidences."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from textorch.models import cpu_decoder, cpu_routes, heads
from textorch.models.crf import CRF
from textorch.models.cpu_decoder import crf_paths
from textorch.models.heads import CRFHead


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
    and once with the NumPy recursions, the decoder of installs without Numba."""
    monkeypatch.delenv(cpu_decoder.DISABLE_ENV, raising=False)
    if request.param == "numpy":
        monkeypatch.setattr(cpu_decoder, "compiled_decoder", lambda: None)
    else:
        cpu_decoder.compiled_decoder.cache_clear()
        assert cpu_decoder.compiled_decoder() is not None, "numba is installed with textorch and must compile the CRF"
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
    paths, scores = crf_paths(emissions.numpy(), lengths.numpy(), crf.transitions.detach().numpy(),
                                            crf.start_transitions.detach().numpy(), crf.end_transitions.detach().numpy())
    assert np.array_equal(paths, expected_paths.numpy())
    assert np.allclose(scores, expected_scores.numpy(), atol=1e-6)
    assert (scores[~mask.numpy()] == 0).all() and (scores[mask.numpy()] > 0).all()



def test_crf_paths_without_the_kernel_never_load_it_and_give_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``compiled=False`` (the tagger without PyTorch) decodes with the NumPy recursions without
    asking for the kernel, and gives the kernel's paths and confidences: one decoder either way."""
    rng = np.random.default_rng(11)
    params = [rng.normal(size=size) for size in ((6, 6), 6, 6)]
    emissions = (rng.normal(size=(9, 17, 6)) * 3).astype(np.float32)
    lengths = np.array([17, 1, 5, 17, 2, 9, 1, 16, 3])
    compiled = crf_paths(emissions, lengths, *params)

    def refuse() -> None:
        raise AssertionError("compiled=False asked for the compiled kernel")

    monkeypatch.setattr(cpu_decoder, "compiled_decoder", refuse)
    plain = crf_paths(emissions, lengths, *params, compiled=False)
    assert np.array_equal(plain[0], compiled[0]) and plain[1].dtype == np.float32
    assert np.allclose(plain[1], compiled[1], atol=1e-6)
    assert crf_paths(emissions, lengths, *params, with_confidence=False, compiled=False)[1] is None

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
    paths, scores = crf_paths(emissions.numpy(), lengths.numpy(), *params)
    assert np.array_equal(paths, expected_paths.numpy())
    assert np.allclose(scores, expected.numpy(), atol=1e-6)
    for row, n in enumerate(lengths.tolist()):
        one_paths, one_scores = crf_paths(emissions[row:row + 1, :n].numpy(), lengths[row:row + 1].numpy(),
                                                        *params)
        assert np.array_equal(one_paths[0], paths[row, :n]) and np.allclose(one_scores[0], scores[row, :n], atol=1e-6)
    for rows in (slice(None), slice(0, 1)):
        bare_paths, none = crf_paths(emissions[rows].numpy(), lengths[rows].numpy(), *params,
                                                   with_confidence=False)
        assert none is None and np.array_equal(bare_paths, paths[rows])


def test_cpu_crf_decoders_agree_with_each_other_on_real_sized_batches() -> None:
    """The compiled kernel and the NumPy recursions, on batches shaped like tagging's (CoNLL-2003 at batch 32,
    GROBID headers: long rows, more tags), float32 emissions as the network gives them."""
    rng = np.random.default_rng(3)
    kernel = cpu_decoder.compiled_decoder()
    assert kernel is not None
    for batch, length, tags in ((32, 14, 9), (5, 159, 13), (1, 15, 9)):
        params = [rng.normal(size=size) for size in ((tags, tags), tags, tags)]
        emissions = (rng.normal(size=(batch, length, tags)) * 3).astype(np.float32)
        lengths = rng.integers(1, length + 1, batch)
        lengths[0] = length
        compiled = crf_paths(emissions, lengths, *params)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cpu_decoder, "compiled_decoder", lambda: None)
            plain = crf_paths(emissions, lengths, *params)
        assert np.array_equal(compiled[0], plain[0])
        assert np.allclose(compiled[1], plain[1], atol=1e-6) and compiled[1].dtype == np.float32
        # Any layout the kernel was not compiled for is converted, never misread: a strided view,
        # Fortran order, int32 lengths, read-only parameters.
        strided = np.repeat(emissions, 2, axis=1)[:, ::2]
        fortran = [np.asfortranarray(params[0]), *params[1:]]
        for p in fortran:
            p.setflags(write=False)
        odd = crf_paths(strided, lengths.astype(np.int32), *fortran)
        assert not strided.flags.c_contiguous and np.array_equal(odd[0], compiled[0])
        assert np.allclose(odd[1], compiled[1], atol=1e-6)


def test_compiled_crf_kernel_source_runs_as_python_with_the_same_results() -> None:
    """The kernel's loops, uncompiled (how one would step through them in a debugger), give
    what the compiled kernel gives."""
    rng = np.random.default_rng(4)
    params = [rng.normal(size=size) for size in ((4, 4), 4, 4)]
    emissions, lengths = rng.normal(size=(3, 5, 4)) * 2, np.array([5, 1, 3])
    compiled = cpu_decoder.decode(cpu_decoder.compiled_decoder(), emissions, lengths, *params, True)
    python = cpu_decoder.decode(cpu_decoder._decode_rows, emissions, lengths, *params, True)
    assert np.array_equal(compiled[0], python[0]) and np.allclose(compiled[1], python[1], atol=1e-7)
    assert not compiled[2].any() and not python[2].any()


def test_cpu_viterbi_breaks_ties_towards_the_first_tag(crf_decoder: str) -> None:
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
    paths, _ = crf_paths(emissions, lengths, trans, start, end)
    assert paths.tolist() == expected
    for row in range(len(lengths)):
        one, _ = crf_paths(emissions[row:row + 1, : lengths[row]], lengths[row:row + 1],
                                         trans, start, end, with_confidence=False)
        assert one[0].tolist() == expected[row][: lengths[row]]


def test_cpu_crf_decoders_ignore_padding_values(crf_decoder: str) -> None:
    crf = _random_crf(6, seed=3)
    emissions = np.random.default_rng(0).normal(size=(3, 8, 6)).astype(np.float32)
    lengths = np.array([8, 3, 5])
    params = [p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    paths, scores = crf_paths(emissions, lengths, *params)
    noisy = emissions.copy()
    for row, n in enumerate(lengths):
        noisy[row, n:] = np.nan if row == 1 else 1e6
    noisy_paths, noisy_scores = crf_paths(noisy, lengths, *params)
    assert np.array_equal(paths, noisy_paths) and np.array_equal(scores, noisy_scores)


def test_compiled_crf_decoder_can_be_switched_off_and_falls_back_on_failure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """``TEXTORCH_DISABLE_NUMBA=1`` and a Numba that fails to compile both leave the NumPy recursions
    (a warning for the failure), never a failed tagging call; a Numba that cannot cache
    compiles without caching."""
    import numba

    cpu_decoder.compiled_decoder.cache_clear()
    monkeypatch.setenv(cpu_decoder.DISABLE_ENV, "1")
    assert cpu_decoder.compiled_decoder() is None
    cpu_decoder.compiled_decoder.cache_clear()
    monkeypatch.delenv(cpu_decoder.DISABLE_ENV)

    # No writable cache location (Numba refuses ``cache=True``): compiled without its cache.
    real_njit = numba.njit

    def no_cache(*args, **kwargs):
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function: no locator available")
        return real_njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", no_cache)
    kernel = cpu_decoder.compiled_decoder()
    assert kernel is not None
    paths, _, failed = cpu_decoder.decode(kernel, np.array([[[0.0, 1.0], [2.0, 0.0]]]), np.array([2]),
                                           np.zeros((2, 2)), np.zeros(2), np.zeros(2), True)
    assert paths.tolist() == [[1, 0]] and not failed.any()
    cpu_decoder.compiled_decoder.cache_clear()

    def broken(*args, **kwargs):
        raise RuntimeError("no LLVM here")

    monkeypatch.setattr(numba, "njit", broken)
    with caplog.at_level("WARNING", logger="textorch.models.cpu_decoder"):
        assert cpu_decoder.compiled_decoder() is None
    assert "no LLVM here" in caplog.text
    _assert_crf_head_decodes_as_torch_crf(seed=2)
    cpu_decoder.compiled_decoder.cache_clear()
    monkeypatch.undo()
    assert cpu_decoder.compiled_decoder() is not None


def test_crf_head_uses_the_cpu_kernel_only_without_gradients_and_where_the_routes_take_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel_calls = []
    best_paths = heads.cpu_crf_paths
    monkeypatch.setattr(heads, "cpu_crf_paths", lambda *a, **k: kernel_calls.append(1) or best_paths(*a, **k))
    head = _assert_crf_head_decodes_as_torch_crf(seed=5)
    assert kernel_calls == [1]
    h = torch.randn(2, 5, 4, requires_grad=True)
    mask = torch.ones(2, 5, dtype=torch.bool)
    paths, scores = head.decode(h, mask)  # gradients recorded: the reference CRF
    assert scores.requires_grad and kernel_calls == [1]
    with torch.no_grad(), cpu_routes.taking(cpu_routes.FAST.without("crf_kernel")):
        assert torch.equal(head.decode(h, mask)[0], paths)
    assert kernel_calls == [1]


def _assert_crf_head_decodes_as_torch_crf(seed: int) -> CRFHead:
    """The CRF head's CPU decoding (compiled or reference) against the PyTorch CRF's own Viterbi;
    the head (its emission layer the identity) for more calls."""
    crf = _random_crf(4, seed=seed)
    head = CRFHead(4, 4)
    with torch.no_grad():
        head.emissions.weight.copy_(torch.eye(4))
        head.emissions.bias.zero_()
    head.crf = crf
    emissions = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        paths, scores = head.decode(emissions, mask)
        reference, _ = crf.decode(emissions, mask)
    assert torch.equal(paths, reference)
    assert scores.shape == (2, 5) and float(scores[1, 2:].abs().sum()) == 0.0
    return head


def test_cpu_crf_decoders_survive_extreme_scores(crf_decoder: str) -> None:
    """Emission gaps of thousands underflow the kernel's scaled recursion; the log-space one takes
    over for the rows that underflowed."""
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
        failed = cpu_decoder.decode(cpu_decoder.compiled_decoder(), emissions, lengths, *params, True)[2]
        assert failed.tolist() == [True, False]
    paths, scores = crf_paths(emissions, lengths, *params)
    assert np.array_equal(paths, expected.numpy())
    assert np.isfinite(scores).all()
    assert np.allclose(scores, reference.gather(-1, expected.unsqueeze(-1)).squeeze(-1).numpy(), atol=1e-6)


def test_cpu_crf_decoding_by_lengths_ignores_what_lies_past_them(crf_decoder: str) -> None:
    """A strided view whose padded positions hold leftovers: only each row's length is read."""
    crf = _random_crf(5, seed=8)
    emissions = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(8))
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    with torch.no_grad():
        expected_paths, expected_scores = crf.best_paths_with_confidence(emissions * mask.unsqueeze(-1), mask)
        leftovers = emissions.masked_fill(~mask.unsqueeze(-1), 1e4).transpose(0, 1).contiguous().transpose(0, 1)
        paths, scores = heads.cpu_crf_paths(crf, leftovers, lengths)
    assert torch.equal(paths[mask], expected_paths[mask])
    assert torch.allclose(scores[mask], expected_scores[mask], atol=1e-6)
    with pytest.raises(ValueError, match="one length per row"):
        heads.cpu_crf_paths(crf, emissions, lengths[:2])


def test_every_decoder_avoids_forbidden_moves_however_the_emissions_pull(crf_decoder: str) -> None:
    """Moves ruled out by ``CRF.forbid`` never appear in a best path, even where the emissions
    favour them by far, and carry no probability; every decoder reads them from the parameters."""
    from textorch.data.tags import iob2_forbidden
    from textorch.models.cpu_decoder import path_posteriors, viterbi_paths

    labels = ["B-<a>", "I-<a>", "B-<b>", "I-<b>", "O"]
    forbidden, at_start = iob2_forbidden(labels)
    crf = _random_crf(len(labels), seed=3)
    crf.forbid(torch.tensor(forbidden), torch.tensor(at_start))
    generator = torch.Generator().manual_seed(0)
    emissions = torch.randn(16, 30, len(labels), generator=generator, dtype=torch.float64) * 3
    emissions[:, :, [1, 3]] += 8.0  # the continuations win every token on their own
    lengths = torch.randint(1, 31, (16,), generator=generator)
    mask = torch.arange(30)[None, :] < lengths[:, None]
    params = [p.detach().numpy().astype(np.float64) for p in (crf.transitions, crf.start_transitions, crf.end_transitions)]
    paths, scores = crf_paths(emissions.numpy(), lengths.numpy(), *params)
    with torch.no_grad():
        reference, _ = crf.decode(emissions, mask)
    assert np.array_equal(paths, reference.numpy())
    assert np.array_equal(viterbi_paths(emissions.numpy(), lengths.numpy(), *params), paths)
    for row, n in zip(paths.tolist(), lengths.tolist()):
        assert not at_start[row[0]]
        assert not any(forbidden[a][b] for a, b in zip(row[: n - 1], row[1:n]))
    assert (scores[mask.numpy()] > 0).all() and np.isfinite(scores).all()
    with torch.no_grad():
        marginals = crf.marginals(emissions, mask).gather(-1, reference.unsqueeze(-1)).squeeze(-1).numpy()
    assert np.allclose(path_posteriors(emissions.numpy(), lengths.numpy(), *params, paths), marginals * mask.numpy(), atol=1e-5)
    assert np.allclose(scores, marginals * mask.numpy(), atol=1e-5)
