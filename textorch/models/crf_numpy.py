"""CRF inference on the CPU in NumPy: Viterbi paths and the posterior of each chosen tag.

Why a second implementation next to :mod:`textorch.models.crf`: decoding loops over time, and
each step is a handful of operations on arrays of a few hundred numbers. There, a PyTorch
operator costs 5-10 microseconds of dispatch while a NumPy one costs about 1, and the
forward-backward pass needs three such loops. Measured on CoNLL-2003 and GROBID date tagging,
this module made the CRF part of tagging 3-5x cheaper (one-sequence calls gained most). Training
keeps the PyTorch CRF (it needs gradients); both are checked against each other in the tests.

The forward-backward pass runs in probability space with each step renormalised (a matrix
product per step), in float64; when scores are so far apart that a step nears underflow, it is
redone in log space, which is exact for any range.

Tagging decodes with the compiled kernel of :mod:`textorch.models.crf_compiled` when Numba is
there (7-25x faster again); this module is then its underflow fallback (log space) and the
decoder where Numba is missing. Training on the CPU uses :func:`log_partition` from here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from textorch.models.crf_compiled import current_decoder, numpy_time_spent
from textorch.models.crf_compiled import decode as compiled_decode


def _lse_step(previous: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """``out[b, j] = logsumexp_i(previous[b, i] + trans[i, j])``, exact for any score range."""
    scores = previous[:, :, None] + trans  # (B, T_prev, T)
    peak = scores.max(axis=1)
    return np.log(np.exp(scores - peak[:, None, :]).sum(axis=1)) + peak


def viterbi_with_confidence(
    emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray,
    with_confidence: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Best tag ids ``(B, L)`` (0 beyond each length) and ``P(y_t = path_t | x)`` ``(B, L)``
    (None with ``with_confidence=False``: Viterbi alone, about half the work).

    ``emissions`` is ``(B, L, T)``; ``lengths`` gives each sequence's valid prefix (>= 1).
    Values at padded positions never change a result.
    """
    em = emissions.astype(np.float64, copy=False)
    trans = trans.astype(np.float64, copy=False)
    start = start.astype(np.float64, copy=False)
    end = end.astype(np.float64, copy=False)
    lengths = np.asarray(lengths)
    kernel = current_decoder()
    if kernel is not None:
        paths, confidence, failed = compiled_decode(kernel, em, lengths, trans, start, end, with_confidence)
        if confidence is not None and failed.any():  # scores thousands apart: log space for those rows
            rows = np.flatnonzero(failed)
            valid = np.arange(em.shape[1])[None, :] < lengths[rows, None]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
                confidence[rows] = _log_space_confidence(em[rows], valid, True, paths[rows], trans, start, end)
        return paths, confidence
    started = time.perf_counter()
    result = _numpy_viterbi_with_confidence(em, lengths, trans, start, end, with_confidence)
    numpy_time_spent(time.perf_counter() - started)
    return result


def _numpy_viterbi_with_confidence(
    em: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray, with_confidence: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`viterbi_with_confidence` in NumPy operations, on float64 arrays."""
    batch, length, num_tags = em.shape
    ragged = bool((lengths != length).any())
    valid = np.arange(length)[None, :] < lengths[:, None]  # (B, L)
    # Viterbi with backpointers; at padded steps the pointer is the identity.
    identity = np.broadcast_to(np.arange(num_tags), (batch, num_tags))
    score = start + em[:, 0]
    pointers = np.empty((max(length - 1, 0), batch, num_tags), dtype=np.int64)
    trans_to = np.ascontiguousarray(trans.T)  # [next tag, previous tag]
    offsets = _row_offsets(batch, num_tags)
    for t in range(1, length):
        candidates = score[:, None, :] + trans_to  # (B, T, T_prev)
        best_prev, best = _best_previous(candidates, offsets)
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
    if not with_confidence:
        return paths, None

    with np.errstate(divide="ignore", invalid="ignore"):  # underflow falls back to log space
        return paths, _confidence(em, valid, ragged, paths, trans, start, end)


_RENORMALISE_EVERY = 4
"""Steps between renormalisations of the forward and backward vectors: their sums may grow
by at most ``T`` per step (entries of the step matrices are <= 1), and four steps keep even
large transition gaps far from float64's limits (underflow is checked)."""


@dataclass
class _Passes:
    """Forward and backward vectors of a batch, from products of per-step matrices."""

    shifted: np.ndarray  # (B, L, T): exp(emission - its row maximum)
    products: np.ndarray  # (B, L-1, T_prev, T): transition times next emission; identity at padding
    alphas: np.ndarray  # (L, B, T), each row at some positive scale
    betas: np.ndarray  # (L, B, T), likewise
    joint: np.ndarray  # (L, B, T) = alphas * betas: unnormalised posteriors of each position
    totals: np.ndarray  # (L, B): their sums
    log_scale: np.ndarray  # (B,): log of what the forward renormalisations divided by


def _step_matrix_passes(
    em: np.ndarray, valid: np.ndarray, ragged: bool, trans: np.ndarray, start: np.ndarray, end: np.ndarray
) -> _Passes | None:
    """One matrix product per step and direction (padded steps are identities, so one loop
    serves all lengths); the vectors are renormalised every few steps. Each position's
    posteriors are normalised on their own, so the vectors' scales never matter. None when a
    position's total came near float64 underflow."""
    batch, length, num_tags = em.shape
    shifted = np.exp(em - em.max(axis=2, keepdims=True))
    products = np.exp(trans - trans.max()) * shifted[:, 1:, None, :]  # (B, L-1, T_prev, T)
    if ragged:
        products[~valid[:, 1:]] = np.eye(num_tags)
    alphas = np.empty((length, batch, 1, num_tags))
    alphas[0, :, 0] = np.exp(start - start.max()) * shifted[:, 0]
    log_scale = np.zeros(batch)
    for t in range(1, length):
        np.matmul(alphas[t - 1], products[:, t - 1], out=alphas[t])
        if t % _RENORMALISE_EVERY == 0:
            total = alphas[t].sum(axis=2, keepdims=True)
            alphas[t] /= total
            log_scale += np.log(total[:, 0, 0])
    betas = np.empty((length, batch, num_tags, 1))
    betas[-1, :, :, 0] = np.exp(end - end.max())
    for t in range(length - 2, -1, -1):
        np.matmul(products[:, t], betas[t + 1], out=betas[t])
        if t % _RENORMALISE_EVERY == 0:
            betas[t] /= betas[t].sum(axis=1, keepdims=True)
    alphas, betas = alphas[:, :, 0, :], betas[:, :, :, 0]
    joint = alphas * betas  # (L, B, T)
    totals = joint.sum(axis=2)
    if not (np.isfinite(totals).all() and totals.min() > 1e-200):
        return None
    return _Passes(shifted, products, alphas, betas, joint, totals, log_scale)


def _row_offsets(batch: int, num_tags: int) -> np.ndarray:
    """``(B, T)`` start of each row of a flattened ``(B, T, T_prev)`` array, for :func:`_best_previous`."""
    return (np.arange(batch * num_tags) * num_tags).reshape(batch, num_tags)


def _best_previous(candidates: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best previous tag and its score for each next tag: argmax and max over the last axis of a
    contiguous ``(..., T, T_prev)`` array. Why this layout and no ``max``: on arrays this small
    NumPy's ``max`` costs about 8 us and an argmax over a middle axis 2.7, where an argmax over
    the last axis costs 1.6 and picking the maxima at its indices 1 (a Viterbi step of a batch
    of 32 with 9 tags: 15.4 -> 8.1 us). Ties go to the first previous tag, as before."""
    best_prev = candidates.argmax(axis=-1)
    return best_prev, candidates.reshape(-1)[offsets + best_prev]


def _confidence(
    em: np.ndarray, valid: np.ndarray, ragged: bool, paths: np.ndarray, trans: np.ndarray, start: np.ndarray,
    end: np.ndarray,
) -> np.ndarray:
    """Forward-backward: the posterior probability of each position's tag in ``paths``.

    Scaled forward-backward in probability space (emissions shifted by their row maximum, each
    step's vectors renormalised, each position's posteriors normalised on their own). Both
    passes have the form ``x_new = shifted[t] * (x @ M)`` (forward: ``M`` the transition
    weights; backward, on ``u_t = shifted[t] * beta_t``: their transpose), so they run
    side by side, one stacked product per step for both: a dozen array operations per step became
    seven (a batch of 5 sequences of up to 159 tokens, 13 tags: confidences 1.64 -> 1.29 ms;
    GROBID name-header at batch 32, dense layer and CRF 8.3 -> 7.9 ms a pass). Should a
    position's total underflow (scores thousands apart), the log-space version is used instead.
    """
    batch, length, num_tags = em.shape
    shifted = np.exp(em - em.max(axis=2, keepdims=True))  # (B, L, T), row maxima 1
    if ragged:
        shifted[~valid] = 1.0
    weights = np.exp(trans - trans.max())  # the shift cancels in the normalisation
    both_weights = np.stack([weights, weights.T])[:, None]  # (2, 1, T, T): forward, backward
    # step k scales the forward vector by position k and the backward one by position L-1-k
    scalings = np.stack([shifted, shifted[:, ::-1]], axis=1).transpose(2, 1, 0, 3)  # (L, 2, B, T)
    end_weights = np.exp(end - end.max())
    before = np.empty((length, batch, num_tags))  # alpha_{t-1} @ W: alpha_t without shifted[t]
    after = np.empty((length, batch, num_tags))  # u_t = shifted[t] * beta_t
    before[0] = np.exp(start - start.max())
    state = np.empty((2, batch, 1, num_tags))
    state[0, :, 0] = before[0] * shifted[:, 0]
    state[1, :, 0] = end_weights * shifted[:, length - 1]
    after[length - 1] = state[1, :, 0]
    for k in range(1, length):
        back = length - 1 - k  # the backward pass computes beta_back from u_{back+1}
        step = state @ both_weights  # (2, B, 1, T): alpha_{k-1} @ W, u_{back+1} @ W.T
        before[k] = step[0, :, 0]
        if ragged:  # a row's backward pass starts at its own last position
            step[1] = np.where(valid[:, back + 1, None, None], step[1], end_weights)
        state = step * scalings[k][:, :, None, :]
        state /= state.sum(axis=3, keepdims=True)
        after[back] = state[1, :, 0]
    joint = before * after  # (L, B, T): unnormalised posteriors
    totals = joint.sum(axis=2)
    real = totals[valid.T]  # padded positions may hold anything
    if not (np.isfinite(real).all() and real.min() > 1e-200):
        return _log_space_confidence(em, valid, ragged, paths, trans, start, end)
    chosen = np.take_along_axis(joint, paths.T[:, :, None], axis=2)[:, :, 0] / np.where(valid.T, totals, 1.0)
    confidence = chosen.T.astype(np.float32)
    confidence[~valid] = 0.0
    return confidence


def _log_space_confidence(
    em: np.ndarray, valid: np.ndarray, ragged: bool, paths: np.ndarray, trans: np.ndarray, start: np.ndarray,
    end: np.ndarray,
) -> np.ndarray:
    """Forward-backward in log space: slower, safe whatever the score ranges."""
    batch, length, num_tags = em.shape
    alphas = np.empty_like(em)
    alpha = start + em[:, 0]
    alphas[:, 0] = alpha
    for t in range(1, length):
        step = _lse_step(alpha, trans) + em[:, t]
        alpha = np.where(valid[:, t : t + 1], step, alpha) if ragged else step
        alphas[:, t] = alpha
    log_z = _logsumexp(alpha + end)
    betas = np.empty_like(em)
    beta = np.broadcast_to(end, (batch, num_tags))
    betas[:, length - 1] = beta
    for t in range(length - 2, -1, -1):
        step = _lse_step(em[:, t + 1] + beta, trans.T)
        beta = np.where(valid[:, t + 1 : t + 2], step, beta) if ragged else step
        betas[:, t] = beta
    chosen = np.take_along_axis(alphas + betas, paths[:, :, None], axis=2)[:, :, 0]
    confidence = np.exp(chosen - log_z[:, None])
    confidence[~valid] = 0.0
    return confidence.astype(np.float32)


def _logsumexp(x: np.ndarray) -> np.ndarray:
    peak = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - peak).sum(axis=1)) + peak[:, 0]


@dataclass
class LogPartition:
    """``log Z`` of each sequence and its gradients, for training on the CPU.

    The gradient of ``log Z`` is a set of posteriors: ``d/d em[b, t, j] = P(y_t = j)``,
    ``d/d trans[i, j] = sum_t P(y_t = i, y_t+1 = j)``, ``d/d start[j] = P(y_0 = j)`` and
    ``d/d end[j] = P(y_last = j)``; one forward-backward pass gives them all, where autograd
    through the log-space loop of :class:`textorch.models.crf.CRF` records every step twice.
    """

    log_z: np.ndarray  # (B,)
    node: np.ndarray  # (B, L, T), 0 at padding
    pair: np.ndarray  # (B, T, T), summed over each sequence's steps
    first: np.ndarray  # (B, T)
    last: np.ndarray  # (B, T)


TRAINING_CELLS = 4_000_000
"""Largest ``B * L * T * T`` :func:`log_partition` takes on (32 MB of float64 step matrices)."""


def log_partition(
    emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray
) -> LogPartition | None:
    """:class:`LogPartition` of a batch; None where the caller should use the log-space CRF
    instead: when a step comes near float64 underflow (scores hundreds of nats apart), or when
    the batch's step matrices would exceed ``TRAINING_CELLS`` (long GROBID sequences with many
    labels: 32 x 3,000 tokens x 50 x 50 tags would be 2 GB)."""
    batch, length, num_tags = emissions.shape
    if batch * length * num_tags * num_tags > TRAINING_CELLS:
        return None
    em = emissions.astype(np.float64, copy=False)
    trans, start, end = (a.astype(np.float64, copy=False) for a in (trans, start, end))
    lengths = np.asarray(lengths)
    valid = np.arange(length)[None, :] < lengths[:, None]
    ragged = bool((lengths != length).any())
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if ragged:  # padded emissions may hold anything: keep them out of every maximum
            em = np.where(valid[:, :, None], em, 0.0)
        passes = _step_matrix_passes(em, valid, ragged, trans, start, end)
        if passes is None:
            return None
        # alphas[L-1] carries each sequence's last valid step (identities after it); the shifts
        # taken out of the exponentials come back in log space.
        closing = passes.alphas[-1] @ np.exp(end - end.max())
        peaks = np.where(valid, em.max(axis=2), 0.0).sum(axis=1)
        log_z = (passes.log_scale + np.log(closing) + peaks + (lengths - 1) * trans.max() + start.max() + end.max())
        node = (passes.joint / passes.totals[:, :, None]).transpose(1, 0, 2)  # (B, L, T)
        node[~valid] = 0.0
        pair = np.zeros((batch, num_tags, num_tags))
        if length > 1:
            # xi_t[i, j] = alpha_t[i] W[i, j] v_t+1[j] / c_t with v = shifted * beta and c_t its sum
            # over (i, j); summed over t as one batched product instead of a (B, L, T, T) array.
            weights = np.exp(trans - trans.max())
            before = passes.alphas[:-1].transpose(1, 0, 2)  # (B, L-1, T)
            after = (passes.shifted[:, 1:].transpose(1, 0, 2) * passes.betas[1:]).transpose(1, 0, 2)
            norm = (before * (after @ weights.T)).sum(axis=2)  # (B, L-1)
            scale = np.where(valid[:, 1:], 1.0 / norm, 0.0)
            pair = weights * ((before * scale[:, :, None]).transpose(0, 2, 1) @ after)
        last = node[np.arange(batch), lengths - 1]
    if not (np.isfinite(log_z).all() and np.isfinite(node).all() and np.isfinite(pair).all()):
        return None
    return LogPartition(log_z, node, pair, node[:, 0], last)
