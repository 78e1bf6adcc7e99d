"""CRF checked against brute-force enumeration of every tag sequence.

With T=3 tags and L<=4 there are at most 81 sequences, so the exact log partition, best
path and marginals are cheap to compute directly and leave no room for an off-by-one in
the masked recursions to hide.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from textorch.models.crf import CRF

NUM_TAGS = 3
MAX_LEN = 4
LENGTHS = [4, 1, 3, 2, 4, 1]
TOL = 1e-6


def _path_score(crf: CRF, emissions: torch.Tensor, path: tuple[int, ...]) -> torch.Tensor:
    score = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
    for t, tag in enumerate(path):
        score = score + emissions[t, tag]
        if t > 0:
            score = score + crf.transitions[path[t - 1], tag]
    return score


def _brute_force(
    crf: CRF, emissions: torch.Tensor, length: int
) -> tuple[torch.Tensor, tuple[int, ...], torch.Tensor, torch.Tensor]:
    """Exact log Z, best path, its score and marginals (length, T) for one sequence."""
    paths = list(itertools.product(range(NUM_TAGS), repeat=length))
    scores = torch.stack([_path_score(crf, emissions, p) for p in paths])
    log_z = torch.logsumexp(scores, dim=0)
    probs = (scores - log_z).exp()
    marg = torch.zeros(length, NUM_TAGS, dtype=emissions.dtype)
    for p, prob in zip(paths, probs):
        for t, tag in enumerate(p):
            marg[t, tag] += prob
    best = int(scores.argmax())
    return log_z, paths[best], scores[best], marg


def _random_crf(seed: int) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(NUM_TAGS).double()
    with torch.no_grad():
        for param in crf.parameters():
            param.normal_()  # larger than the init so transitions really matter
    return crf


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    batch = len(LENGTHS)
    emissions = torch.randn(batch, MAX_LEN, NUM_TAGS, generator=gen, dtype=torch.float64) * 2
    lengths = torch.tensor(LENGTHS)
    mask = torch.arange(MAX_LEN).unsqueeze(0) < lengths.unsqueeze(1)
    tags = torch.randint(0, NUM_TAGS, (batch, MAX_LEN), generator=gen)
    tags = tags.masked_fill(~mask, -100)
    return emissions, tags, mask


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force(seed: int) -> None:
    crf = _random_crf(seed)
    emissions, tags, mask = _batch(seed)
    with torch.no_grad():
        nll = crf.neg_log_likelihood(emissions, tags, mask)
        paths, best_scores = crf.decode(emissions, mask)
        marg = crf.marginals(emissions, mask)
        for b, length in enumerate(LENGTHS):
            log_z, best_path, best_score, exact_marg = _brute_force(crf, emissions[b], length)
            gold = tuple(tags[b, :length].tolist())
            expected_nll = log_z - _path_score(crf, emissions[b], gold)
            assert nll[b].item() == pytest.approx(expected_nll.item(), abs=TOL)
            assert tuple(paths[b, :length].tolist()) == best_path
            assert paths[b, length:].eq(0).all()
            assert best_scores[b].item() == pytest.approx(best_score.item(), abs=TOL)
            torch.testing.assert_close(marg[b, :length], exact_marg, atol=TOL, rtol=0)
            assert marg[b, length:].eq(0).all()
    assert nll.shape == (len(LENGTHS),) and (nll > 0).all()
    valid = marg.sum(dim=2)[mask]
    torch.testing.assert_close(valid, torch.ones_like(valid), atol=TOL, rtol=0)


def test_padding_has_no_effect() -> None:
    crf = _random_crf(3)
    emissions, tags, mask = _batch(3)
    noisy = emissions.clone()
    noisy[~mask] = torch.tensor([1e4, float("nan"), -float("inf")], dtype=torch.float64)
    other_tags = tags.masked_fill(~mask, 0)
    other_tags[~mask] = 2
    with torch.no_grad():
        ref_nll = crf.neg_log_likelihood(emissions, tags, mask)
        ref_paths, ref_scores = crf.decode(emissions, mask)
        ref_marg = crf.marginals(emissions, mask)
        for em, tg in [(noisy, tags), (emissions, other_tags), (noisy, other_tags)]:
            torch.testing.assert_close(crf.neg_log_likelihood(em, tg, mask), ref_nll)
            paths, scores = crf.decode(em, mask)
            assert torch.equal(paths, ref_paths)
            torch.testing.assert_close(scores, ref_scores)
            torch.testing.assert_close(crf.marginals(em, mask), ref_marg)


def test_single_sequence_unaffected_by_batch_padding() -> None:
    """A short sequence padded to a longer batch gives the same result as alone."""
    crf = _random_crf(4)
    emissions, tags, mask = _batch(4)
    b = 3  # length 2
    alone = slice(0, LENGTHS[b])
    with torch.no_grad():
        nll_batch = crf.neg_log_likelihood(emissions, tags, mask)[b]
        nll_alone = crf.neg_log_likelihood(
            emissions[b : b + 1, alone], tags[b : b + 1, alone], mask[b : b + 1, alone]
        )[0]
    assert nll_batch.item() == pytest.approx(nll_alone.item(), abs=TOL)


def test_gradients_are_finite_and_padding_gets_none() -> None:
    crf = _random_crf(5)
    emissions, tags, mask = _batch(5)
    emissions = emissions.clone()
    # Non-finite padding (e.g. from an upstream -inf fill) must not poison gradients.
    emissions[~mask] = torch.tensor([float("nan"), float("inf"), -float("inf")]).double()
    emissions.requires_grad_(True)
    loss = crf.neg_log_likelihood(emissions, tags, mask).sum()
    loss.backward()
    for name, param in crf.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name
    assert emissions.grad is not None and torch.isfinite(emissions.grad).all()
    assert emissions.grad[~mask].eq(0).all()
    # d NLL / d emissions = marginals - one-hot(gold) at valid positions.
    with torch.no_grad():
        marg = crf.marginals(emissions.detach(), mask)
    one_hot = torch.nn.functional.one_hot(tags.clamp(min=0), NUM_TAGS).double()
    expected = (marg - one_hot) * mask.unsqueeze(2)
    torch.testing.assert_close(emissions.grad, expected, atol=TOL, rtol=0)
    # The backward recursion of the marginals must be as insulated from padding.
    emissions.grad = None
    weights = torch.randn(marg.shape, generator=torch.Generator().manual_seed(0)).double()
    (crf.marginals(emissions, mask) * weights).sum().backward()
    assert torch.isfinite(emissions.grad).all()
    assert emissions.grad[~mask].eq(0).all()


def test_float32_module_agrees_with_float64() -> None:
    crf64 = _random_crf(6)
    crf32 = CRF(NUM_TAGS)
    crf32.load_state_dict({k: v.float() for k, v in crf64.state_dict().items()})
    emissions, tags, mask = _batch(6)
    with torch.no_grad():
        nll32 = crf32.neg_log_likelihood(emissions.float(), tags, mask)
        nll64 = crf64.neg_log_likelihood(emissions, tags, mask)
        paths32, _ = crf32.decode(emissions.float(), mask)
        paths64, _ = crf64.decode(emissions, mask)
        marg32 = crf32.marginals(emissions.float(), mask)
    assert nll32.dtype == torch.float32 and marg32.dtype == torch.float32
    torch.testing.assert_close(nll32.double(), nll64, atol=1e-4, rtol=1e-5)
    assert torch.equal(paths32, paths64)


def test_training_learns_transitions() -> None:
    """With uninformative emissions only start/transition scores can explain the cyclic
    gold sequence 0,1,2,0,...; training must find them and decoding must reproduce it."""
    torch.manual_seed(0)
    crf = CRF(NUM_TAGS)
    batch, length = 8, 6
    lengths = torch.tensor([6, 5, 4, 3, 2, 1, 6, 4])
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    tags = (torch.arange(length) % NUM_TAGS).expand(batch, length).masked_fill(~mask, -100)
    emissions = torch.zeros(batch, length, NUM_TAGS)
    optimizer = torch.optim.Adam(crf.parameters(), lr=0.1)
    initial = crf.neg_log_likelihood(emissions, tags, mask).mean().item()
    for _ in range(60):
        optimizer.zero_grad()
        loss = crf.neg_log_likelihood(emissions, tags, mask).mean()
        loss.backward()
        optimizer.step()
    final = crf.neg_log_likelihood(emissions, tags, mask).mean().item()
    assert final < 0.1 * initial
    with torch.inference_mode():
        paths, _ = crf.decode(emissions, mask)
    assert torch.equal(paths, tags.masked_fill(~mask, 0))


def test_inference_mode() -> None:
    crf = _random_crf(7)
    emissions, tags, mask = _batch(7)
    with torch.no_grad():
        ref_paths, ref_scores = crf.decode(emissions, mask)
        ref_marg = crf.marginals(emissions, mask)
        ref_nll = crf.neg_log_likelihood(emissions, tags, mask)
    with torch.inference_mode():
        paths, scores = crf.decode(emissions, mask)
        marg = crf.marginals(emissions, mask)
        nll = crf.neg_log_likelihood(emissions, tags, mask)
    assert paths.dtype == torch.long and paths.shape == mask.shape
    assert torch.equal(paths, ref_paths)
    torch.testing.assert_close(scores, ref_scores)
    torch.testing.assert_close(marg, ref_marg)
    torch.testing.assert_close(nll, ref_nll)


def test_init_and_shape_errors() -> None:
    crf = CRF(5)
    assert crf.transitions.shape == (5, 5)
    assert crf.start_transitions.shape == (5,) and crf.end_transitions.shape == (5,)
    for param in crf.parameters():
        assert param.abs().max() <= 0.1
    with pytest.raises(ValueError):
        CRF(0)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="emissions"):
        crf.decode(torch.zeros(2, 3, 4), mask)
    with pytest.raises(ValueError, match="mask"):
        crf.decode(torch.zeros(2, 3, 5), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="tags"):
        crf.neg_log_likelihood(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long), mask)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu() -> None:
    crf = _random_crf(8)
    emissions, tags, mask = _batch(8)
    with torch.no_grad():
        ref_nll = crf.neg_log_likelihood(emissions, tags, mask)
        ref_paths, _ = crf.decode(emissions, mask)
        ref_marg = crf.marginals(emissions, mask)
        crf_gpu = crf.cuda()
        dev = torch.device("cuda")
        nll = crf_gpu.neg_log_likelihood(emissions.to(dev), tags.to(dev), mask.to(dev))
        paths, _ = crf_gpu.decode(emissions.to(dev), mask.to(dev))
        marg = crf_gpu.marginals(emissions.to(dev), mask.to(dev))
    torch.testing.assert_close(nll.cpu(), ref_nll)
    assert torch.equal(paths.cpu(), ref_paths)
    torch.testing.assert_close(marg.cpu(), ref_marg)
