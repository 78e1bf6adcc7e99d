"""The CPU decoder's NumPy recursions (Numba missing or off, underflowing rows, the tagger without PyTorch) against the reference CRF."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from textorch.models.crf import marginal_probabilities, viterbi
from textorch.models.cpu_decoder import path_posteriors, viterbi_paths


def _reference(em: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray):
    mask = torch.from_numpy(np.arange(em.shape[1])[None, :] < lengths[:, None])
    em_t = torch.from_numpy(em.astype(np.float64)).masked_fill(~mask.unsqueeze(2), 0.0)
    params = [torch.from_numpy(a) for a in (trans, start, end)]
    paths = viterbi(em_t, mask, *params)[0]
    posteriors = marginal_probabilities(em_t, mask, *params).gather(-1, paths.unsqueeze(-1)).squeeze(-1)
    return paths.numpy() * mask.numpy(), posteriors.numpy()


@pytest.mark.parametrize("seed", range(40))
def test_paths_and_posteriors_equal_the_reference_crf(seed: int) -> None:
    rng = np.random.default_rng(seed)
    batch, length, tags = int(rng.integers(1, 20)), int(rng.integers(1, 25)), int(rng.integers(2, 10))
    em = (rng.normal(size=(batch, length, tags)) * 4).astype(np.float32)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[rng.integers(0, batch)] = length  # one full row (anywhere: rows are decoded shortest first)
    trans, start, end = rng.normal(size=(tags, tags)), rng.normal(size=tags), rng.normal(size=tags)
    em[np.arange(length)[None, :] >= lengths[:, None]] = np.nan  # padding is never read
    expected_paths, expected_posteriors = _reference(np.nan_to_num(em), lengths, trans, start, end)
    paths = viterbi_paths(em, lengths, trans, start, end)
    np.testing.assert_array_equal(paths, expected_paths)
    posteriors = path_posteriors(em, lengths, trans, start, end, paths)
    np.testing.assert_allclose(posteriors, expected_posteriors, atol=1e-6)
    assert (posteriors[np.arange(length)[None, :] >= lengths[:, None]] == 0).all()


def test_ties_go_to_the_lowest_tag_as_in_the_reference() -> None:
    em = np.zeros((2, 3, 3), dtype=np.float32)
    zeros = np.zeros((3, 3)), np.zeros(3), np.zeros(3)
    np.testing.assert_array_equal(viterbi_paths(em, np.array([3, 2]), *zeros), [[0, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(path_posteriors(em, np.array([3, 2]), *zeros, np.zeros((2, 3), dtype=np.int64)),
                               [[1 / 3] * 3, [1 / 3, 1 / 3, 0]], rtol=1e-6)
