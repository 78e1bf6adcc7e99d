"""The one decoder of tagging on the CPU: CRF Viterbi paths with the posterior of each chosen tag
(:func:`crf_paths`), and a softmax tagger's arg-max with its probability (:func:`softmax_paths`),
on NumPy arrays.

Every door and engine decodes here on the CPU: the PyTorch engine (the CRF head, the one-sequence
route), the ONNX engine and the tagger without PyTorch (:mod:`textorch.tagging.onnx_tagger`). The
PyTorch CRF of :mod:`textorch.models.crf` stays the reference: training, GPUs and the tests'
oracle; it knows nothing of this module. This module imports NumPy alone (Numba on first use),
so that the tagger without PyTorch can decode with it.

Two forms of the same recursions, with the reference CRF's rules (float64 sums, ties to the
lowest-numbered previous tag and the lowest last tag, so the same paths):

* a kernel of plain loops compiled by Numba (:func:`compiled_decoder`). A tagging batch is a few
  hundred numbers per time step, so array code spends its time dispatching a dozen operations
  per step, not computing; the compiled loops do not. Its posteriors use a scaled recursion in
  probability space, which underflows where scores are thousands apart.
* the recursions in log space on whole arrays (:func:`viterbi_paths`, :func:`path_posteriors`),
  a few NumPy calls per time step over the batch. They decode the rows whose scaled recursion
  underflowed, every row where Numba is missing, fails to compile or is switched off
  (``TEXTORCH_DISABLE_NUMBA=1``), and every call made with ``compiled=False``: a process that
  must not pay Numba's load (a fraction of a second and Numba's memory, more than a short
  file's whole tagging; docs/performance.md), the tagger without PyTorch.

``textorch serve`` and the benchmarks load the kernel up front (:func:`preload`); otherwise the
first call that decodes with it does.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import numpy as np

from textorch.runtime.numba_kernels import DISABLE_ENV, compile_kernel

logger = logging.getLogger(__name__)

"""Set to 1 to decode with the NumPy recursions alone (to keep Numba's memory; a broken Numba install)."""

UNDERFLOW = 1e-200
"""A forward or backward total below this is treated as underflow: that row's confidences are
then recomputed in log space (:func:`crf_paths`)."""


def _decode_rows(em, lengths, trans, start, end, with_confidence, paths, confidence, underflow):  # noqa: ANN001
    """Viterbi path of every row, then (``with_confidence``) the posterior of each chosen tag.

    Written as plain loops for Numba (:func:`compiled_decoder`); runs as Python too, slowly.
    ``paths`` and ``confidence`` come in zeroed and are filled up to each row's length.
    Returns, per row, whether its confidences underflowed (then left for log space).

    Ties go to the lowest-numbered previous tag and the lowest last tag, as ``torch.max`` in the
    reference CRF. Confidences use the scaled forward-backward recursion in probability
    space (emissions shifted by their row maximum, each step's vector renormalised): the
    posterior at ``t`` is ``alpha_t[k] * beta_t[k] / sum_j alpha_t[j] * beta_t[j]``, so the
    scales never matter. Only positions before each row's length are read.
    """
    batch, length, num_tags = em.shape
    weights = np.exp(trans - trans.max())
    start_weights = np.exp(start - start.max())
    end_weights = np.exp(end - end.max())
    score = np.empty(num_tags)
    step = np.empty(num_tags)
    pointers = np.empty((length, num_tags), dtype=np.int64)
    shifted = np.empty((length, num_tags))
    alphas = np.empty((length, num_tags))
    beta = np.empty(num_tags)
    next_beta = np.empty(num_tags)
    failed = np.zeros(batch, dtype=np.bool_)
    for b in range(batch):
        n = lengths[b]
        if n <= 0:
            continue
        # Viterbi with back-pointers
        for j in range(num_tags):
            score[j] = start[j] + em[b, 0, j]
        for t in range(1, n):
            for j in range(num_tags):
                best = score[0] + trans[0, j]
                best_previous = 0
                for i in range(1, num_tags):
                    candidate = score[i] + trans[i, j]
                    if candidate > best:
                        best = candidate
                        best_previous = i
                step[j] = best + em[b, t, j]
                pointers[t, j] = best_previous
            for j in range(num_tags):
                score[j] = step[j]
        best = score[0] + end[0]
        current = 0
        for j in range(1, num_tags):
            if score[j] + end[j] > best:
                best = score[j] + end[j]
                current = j
        paths[b, n - 1] = current
        for t in range(n - 1, 0, -1):
            current = pointers[t, current]
            paths[b, t - 1] = current
        if not with_confidence:
            continue
        # Forward pass, each vector normalised to sum 1
        for t in range(n):
            peak = em[b, t, 0]
            for j in range(1, num_tags):
                peak = max(peak, em[b, t, j])
            for j in range(num_tags):
                shifted[t, j] = np.exp(em[b, t, j] - peak)
        total = 0.0
        for j in range(num_tags):
            alphas[0, j] = start_weights[j] * shifted[0, j]
            total += alphas[0, j]
        ok = total > underflow
        for t in range(n):
            if t > 0:
                total = 0.0
                for j in range(num_tags):
                    acc = 0.0
                    for i in range(num_tags):
                        acc += alphas[t - 1, i] * weights[i, j]
                    alphas[t, j] = acc * shifted[t, j]
                    total += alphas[t, j]
                ok = ok and total > underflow
            if not ok:
                break
            for j in range(num_tags):
                alphas[t, j] /= total
        # Backward pass, the posterior of each chosen tag on the way
        for j in range(num_tags):
            beta[j] = end_weights[j]
        t = n - 1
        while ok and t >= 0:
            if t < n - 1:
                total = 0.0
                for i in range(num_tags):
                    acc = 0.0
                    for j in range(num_tags):
                        acc += weights[i, j] * shifted[t + 1, j] * beta[j]
                    next_beta[i] = acc
                    total += acc
                ok = total > underflow
                for i in range(num_tags):
                    beta[i] = next_beta[i] / total
            joint = 0.0
            for j in range(num_tags):
                joint += alphas[t, j] * beta[j]
            ok = ok and joint > underflow
            chosen = paths[b, t]
            confidence[b, t] = alphas[t, chosen] * beta[chosen] / joint
            t -= 1
        failed[b] = not ok
    return failed



@functools.cache
def compiled_decoder() -> Callable | None:
    """:func:`_decode_rows` compiled by Numba, or None (the NumPy recursions decode instead): Numba
    missing or failing, or ``TEXTORCH_DISABLE_NUMBA`` set. Compiled (or loaded from Numba's cache)
    and tried on a tiny input once per process, so that any failure shows here, not mid-call."""
    return compile_kernel(_decode_rows, _try, "the CRF decoder")


def preload() -> bool:
    """Load the compiled kernel now (a server before its first request, a benchmark before its
    timing); False when the NumPy recursions will decode (no Numba, or switched off)."""
    return compiled_decoder() is not None


def _exact(array: np.ndarray, dtype: type) -> np.ndarray:
    """``array`` as the one layout the kernel is compiled for (C order, writable, ``dtype``):
    any other layout would compile, and cache, a second copy of it."""
    flags = array.flags
    if array.dtype == dtype and flags.c_contiguous and flags.writeable:  # the usual case, cheaper than np.require
        return array
    return np.require(array, dtype=dtype, requirements=["C", "W"])


def _try(kernel: Callable) -> None:
    em = np.zeros((1, 2, 2))
    paths = np.zeros((1, 2), dtype=np.int64)
    confidence = np.zeros((1, 2))
    zeros = np.zeros(2)
    kernel(em, np.array([2], dtype=np.int64), np.zeros((2, 2)), zeros, zeros, True, paths, confidence, UNDERFLOW)


def decode(
    kernel: Callable, em: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray,
    with_confidence: bool,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``kernel``'s paths ``(B, L)``, confidences ``(B, L)`` float32 (None without
    ``with_confidence``) and the rows whose confidences underflowed (to redo in log space)."""
    batch, length, _ = em.shape
    paths = np.zeros((batch, length), dtype=np.int64)
    confidence = np.zeros((batch, length))
    em, trans, start, end = (_exact(x, np.float64) for x in (em, trans, start, end))
    failed = kernel(em, _exact(lengths, np.int64), trans, start, end, bool(with_confidence), paths, confidence, UNDERFLOW)
    if not with_confidence:
        return paths, None, failed
    return paths, confidence.astype(np.float32), failed


def crf_paths(
    emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray,
    with_confidence: bool = True, compiled: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Best tag ids ``(B, L)`` int64 (0 beyond each length) and ``P(y_t = path_t | x)`` ``(B, L)``
    float32 (0 beyond each length; None with ``with_confidence=False``) of rows of ``lengths``
    (>= 1): the CPU's one CRF decoding, for every engine. Values past each row's length are never
    read, so padding may hold anything.

    By the compiled kernel, with the log-space recursions for the rows whose scaled recursion
    underflowed; by the log-space recursions alone where the kernel is missing, or with
    ``compiled=False`` (a process that must not load Numba)."""
    # The emissions are converted to float64 where they are read (each form copies them anyway).
    trans, start, end = (a.astype(np.float64, copy=False) for a in (trans, start, end))
    lengths = np.asarray(lengths)
    kernel = compiled_decoder() if compiled else None
    if kernel is None:
        paths = viterbi_paths(emissions, lengths, trans, start, end)
        return paths, path_posteriors(emissions, lengths, trans, start, end, paths) if with_confidence else None
    paths, confidence, failed = decode(kernel, emissions, lengths, trans, start, end, with_confidence)
    if confidence is not None and failed.any():
        rows = np.flatnonzero(failed)
        confidence[rows] = path_posteriors(emissions[rows], lengths[rows], trans, start, end, paths[rows])
    return paths, confidence


def viterbi_paths(emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray,
                  end: np.ndarray) -> np.ndarray:
    """Best tag ids ``(B, L)`` int64 for rows of ``lengths`` (>= 1) by Viterbi in log space on
    whole arrays; 0 beyond each length, which is never read.

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
    """A softmax tagger's decoding, for every engine on the CPU: each position's most probable
    tag ``(B, L)`` int64 (the lowest on a tie) and, with ``with_scores``, its probability, in the
    emissions' float type; 0 beyond each length."""
    mask = np.arange(emissions.shape[1])[None, :] < np.asarray(lengths)[:, None]
    shifted = np.exp(emissions - emissions.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return probabilities.argmax(axis=-1) * mask, (probabilities.max(axis=-1) * mask) if with_scores else None
