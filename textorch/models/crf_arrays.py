"""CRF decoding in NumPy alone: Viterbi paths and their posteriors, vectorised over the batch.

Why a third form of the same recursions: a process that tags with ONNX Runtime
(:mod:`textorch.tagging.onnx_tagger`) imports neither PyTorch nor Numba, whose imports and kernel
load cost more start-up than a short input's whole tagging; and the compiled kernel of
:mod:`textorch.models.crf_compiled` falls back to these where Numba is missing or its scaled
recursion underflows. Each time step here is a handful of NumPy calls over the whole batch,
slower per step than the compiled kernel on long batches, but nothing to load. The rules are the
reference CRF's (:mod:`textorch.models.crf`): float64 sums in the same order, ties to the
lowest-numbered previous tag and the lowest last tag, so the paths are the same.
"""

from __future__ import annotations

import numpy as np


def viterbi_paths(emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray,
                  end: np.ndarray) -> np.ndarray:
    """Best tag ids ``(B, L)`` int64 for rows of ``lengths`` (>= 1); 0 beyond each length.
    Positions past a row's length are never read.

    The rows are taken shortest first, so that the rows still running at step ``t`` are the
    last ones: each step works on those alone (a slice), not on the whole batch through a mask.
    A batch of sequences of mixed lengths (a long-sequence corpus) then costs its tokens, not
    its rows times its longest length."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    sizes = lengths[order]
    em = emissions[order].astype(np.float64, copy=False)
    batch, length, _ = em.shape
    score = start[None, :] + em[:, 0]
    pointers = np.zeros((length, batch, len(start)), dtype=np.int64)
    for t in range(1, length):
        first = int(np.searchsorted(sizes, t, side="right"))  # the rows longer than t
        candidates = score[first:, :, None] + trans[None, :, :]  # (rows, previous, next)
        pointers[t, first:] = candidates.argmax(axis=1)  # the first maximum: the lowest previous tag
        score[first:] = candidates.max(axis=1) + em[first:, t]
    current = (score + end[None, :]).argmax(axis=1)
    paths = np.zeros((batch, length), dtype=np.int64)
    for t in range(length - 1, -1, -1):
        first = int(np.searchsorted(sizes, t, side="right"))
        paths[first:, t] = current[first:]
        if t:
            current[first:] = pointers[t, np.arange(first, batch), current[first:]]
    out = np.empty_like(paths)
    out[order] = paths
    return out


def _logsumexp(values: np.ndarray, axis: int) -> np.ndarray:
    top = values.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.exp(values - top).sum(axis=axis))


def path_posteriors(emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray,
                    end: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """``P(y_t = paths[b, t] | x)`` ``(B, L)`` float32 by the forward-backward recursions in log
    space (no underflow to guard against); 0 beyond each length. Rows shortest first, each step
    over the rows it concerns alone, as :func:`viterbi_paths` does."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    sizes = lengths[order]
    em = emissions[order].astype(np.float64, copy=False)
    batch, length, num_tags = em.shape
    alpha = np.empty((length, batch, num_tags))
    alpha[0] = start[None, :] + em[:, 0]
    for t in range(1, length):
        first = int(np.searchsorted(sizes, t, side="right"))  # the rows longer than t
        alpha[t, :first] = alpha[t - 1, :first]
        alpha[t, first:] = _logsumexp(alpha[t - 1, first:][:, :, None] + trans[None, :, :], axis=1) + em[first:, t]
    beta = np.empty((length, batch, num_tags))
    beta[length - 1] = np.broadcast_to(end[None, :], (batch, num_tags))
    for t in range(length - 2, -1, -1):
        first = int(np.searchsorted(sizes, t + 1, side="right"))  # the rows that go on after t
        # A row's last position starts its backward pass with the end scores.
        beta[t, :first] = end[None, :]
        following = beta[t + 1, first:] + em[first:, t + 1]
        beta[t, first:] = _logsumexp(trans[None, :, :] + following[:, None, :], axis=2)
    log_total = _logsumexp(alpha[sizes - 1, np.arange(batch)] + end[None, :], axis=1)
    chosen = np.take_along_axis(alpha + beta, paths[order].T[:, :, None], axis=2)[:, :, 0].T  # (B, L)
    posteriors = np.exp(chosen - log_total[:, None])
    posteriors[np.arange(length)[None, :] >= sizes[:, None]] = 0.0
    out = np.empty_like(posteriors, dtype=np.float32)
    out[order] = posteriors
    return out


def softmax_paths(emissions: np.ndarray, lengths: np.ndarray,
                  with_scores: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """A softmax tagger's decoding, for the taggers without a CRF: each position's most probable
    tag ``(B, L)`` and, with ``with_scores``, its probability; 0 beyond each length."""
    mask = np.arange(emissions.shape[1])[None, :] < np.asarray(lengths)[:, None]
    shifted = np.exp(emissions - emissions.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return probabilities.argmax(axis=-1) * mask, (probabilities.max(axis=-1) * mask) if with_scores else None
