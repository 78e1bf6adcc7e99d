"""CRF inference on the CPU in NumPy: Viterbi paths and the posterior of each chosen tag.

Why a second implementation next to :mod:`textorch.models.crf`: decoding loops over time, and
each step is a handful of operations on arrays of a few hundred numbers. There, a PyTorch
operator costs 5-10 microseconds of dispatch while a NumPy one costs about 1, and the
forward-backward pass needs three such loops. Measured on CoNLL-2003 and GROBID date tagging,
this module made the CRF part of tagging 3-5x cheaper (one-sequence calls gained most). Training
keeps the PyTorch CRF (it needs gradients); both are checked against each other in the tests.

The log-sum-exp over previous tags is written as a matrix product of exponentials, shifted
by row and column maxima so nothing overflows: ``logsumexp_i(a_i + T_ij) = m + c_j +
log(sum_i exp(a_i - m) * exp(T_ij - c_j))``. Computed in float64.
"""

from __future__ import annotations

import numpy as np


def _lse_step(previous: np.ndarray, exp_trans: np.ndarray, col_max: np.ndarray) -> np.ndarray:
    """``out[b, j] = logsumexp_i(previous[b, i] + trans[i, j])`` for a whole batch."""
    row_max = previous.max(axis=1, keepdims=True)
    return np.log(np.exp(previous - row_max) @ exp_trans) + row_max + col_max


def viterbi_with_confidence(
    emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Best tag ids ``(B, L)`` (0 beyond each length) and ``P(y_t = path_t | x)`` ``(B, L)``.

    ``emissions`` is ``(B, L, T)``; ``lengths`` gives each sequence's valid prefix (>= 1).
    Values at padded positions never change a result.
    """
    em = emissions.astype(np.float64, copy=False)
    trans = trans.astype(np.float64, copy=False)
    start = start.astype(np.float64, copy=False)
    end = end.astype(np.float64, copy=False)
    batch, length, num_tags = em.shape
    lengths = np.asarray(lengths)
    ragged = bool((lengths != length).any())
    valid = np.arange(length)[None, :] < lengths[:, None]  # (B, L)

    # Viterbi with backpointers; at padded steps the pointer is the identity.
    identity = np.broadcast_to(np.arange(num_tags), (batch, num_tags))
    score = start + em[:, 0]
    pointers = np.empty((max(length - 1, 0), batch, num_tags), dtype=np.int64)
    for t in range(1, length):
        candidates = score[:, :, None] + trans  # (B, T_prev, T)
        best_prev = candidates.argmax(axis=1)
        best = candidates.max(axis=1)
        if ragged:
            step_valid = valid[:, t : t + 1]
            score = np.where(step_valid, best + em[:, t], score)
            pointers[t - 1] = np.where(step_valid, best_prev, identity)
        else:
            score = best + em[:, t]
            pointers[t - 1] = best_prev
    rows = np.arange(batch)
    current = (score + end).argmax(axis=1)
    paths = np.empty((batch, length), dtype=np.int64)
    paths[:, length - 1] = current
    for t in range(length - 1, 0, -1):
        current = pointers[t - 1, rows, current]
        paths[:, t - 1] = current
    paths[~valid] = 0

    with np.errstate(divide="ignore"):  # log(0) = -inf for impossible tags is intended
        return paths, _confidence(em, valid, ragged, paths, trans, start, end)


def _confidence(
    em: np.ndarray, valid: np.ndarray, ragged: bool, paths: np.ndarray, trans: np.ndarray, start: np.ndarray,
    end: np.ndarray,
) -> np.ndarray:
    """Forward-backward: the posterior probability of each position's tag in ``paths``."""
    batch, length, num_tags = em.shape
    col_max = trans.max(axis=0)
    exp_trans = np.exp(trans - col_max)
    row_max_t = trans.max(axis=1)
    exp_trans_t = np.exp(trans - row_max_t[:, None]).T  # for the backward pass, indexed [j, i]
    alphas = np.empty_like(em)
    alpha = start + em[:, 0]
    alphas[:, 0] = alpha
    for t in range(1, length):
        step = _lse_step(alpha, exp_trans, col_max) + em[:, t]
        alpha = np.where(valid[:, t : t + 1], step, alpha) if ragged else step
        alphas[:, t] = alpha
    log_z = _logsumexp(alpha + end)
    betas = np.empty_like(em)
    beta = np.broadcast_to(end, (batch, num_tags))
    betas[:, length - 1] = beta
    for t in range(length - 2, -1, -1):
        step = _lse_step(em[:, t + 1] + beta, exp_trans_t, row_max_t)
        beta = np.where(valid[:, t + 1 : t + 2], step, beta) if ragged else step
        betas[:, t] = beta
    chosen = np.take_along_axis(alphas + betas, paths[:, :, None], axis=2)[:, :, 0]
    confidence = np.exp(chosen - log_z[:, None])
    confidence[~valid] = 0.0
    return confidence.astype(np.float32)


def _logsumexp(x: np.ndarray) -> np.ndarray:
    peak = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - peak).sum(axis=1)) + peak[:, 0]
