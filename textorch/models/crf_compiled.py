"""CRF decoding compiled to machine code with Numba: Viterbi paths and their posteriors.

Why compiled: a tagging batch is a few hundred numbers per time step, so array libraries (PyTorch
or NumPy) spend their time dispatching a dozen operations per step, not computing. The same
recursions as plain loops, compiled by Numba, are the CPU's one decoding kernel
(:func:`cpu_best_paths_of_arrays`, for the PyTorch and ONNX engines; :func:`best_paths` for a
:class:`~textorch.models.crf.CRF`'s tensors), taken where a call's routes say so
(``CpuRoutes.crf_kernel``); the PyTorch CRF of :mod:`textorch.models.crf` stays the reference, for
training, GPUs and the tests, and knows nothing of this module.

Loading it is not free: importing Numba and loading the kernel from Numba's cache costs a
process's first tagging call a fraction of a second (more the very first time, when it
compiles) and Numba's memory (docs/performance.md). ``textorch serve`` and the benchmarks load it
up front (:func:`preload`). Where Numba cannot be imported or compile, or with
``TEXTORCH_DISABLE_NUMBA=1``, the reference recursions decode (same results, slower).
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Callable

import numpy as np
import torch

from textorch.models.crf import CRF
from textorch.models.crf_arrays import path_posteriors, viterbi_paths

logger = logging.getLogger(__name__)

DISABLE_ENV = "TEXTORCH_DISABLE_NUMBA"
"""Set to 1 to decode with the reference CRF (to keep Numba's memory; a broken Numba install)."""

UNDERFLOW = 1e-200
"""A forward or backward total below this is treated as underflow: that row's confidences are
then recomputed in log space (:func:`cpu_best_paths_of_arrays`)."""


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
    """:func:`_decode_rows` compiled by Numba, or None (the reference CRF decodes instead): Numba missing
    or failing, or ``TEXTORCH_DISABLE_NUMBA`` set. Compiled (or loaded from Numba's cache)
    and tried on a tiny input once per process, so that any failure shows here, not mid-call."""
    if os.environ.get(DISABLE_ENV, "").strip() not in ("", "0"):
        return None
    try:
        import numba
    except ImportError:
        logger.info("numba is not installed: the CRF decodes with PyTorch (slower)")
        return None
    try:
        try:
            kernel = numba.njit(cache=True, nogil=True)(_decode_rows)
        except RuntimeError:  # no writable cache location: compile in every process
            kernel = numba.njit(nogil=True)(_decode_rows)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # cache write failures are Numba warnings
            _try(kernel)
    except Exception as error:  # noqa: BLE001 - any Numba failure leaves the reference CRF
        logger.warning("numba could not compile the CRF decoder (%s); decoding with PyTorch", error)
        return None
    return kernel


def preload() -> bool:
    """Load the compiled decoder now (a server before its first request, a benchmark before its
    timing); False when the reference CRF will decode (no Numba, or switched off)."""
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
    """Paths ``(B, L)``, confidences ``(B, L)`` float32 (None without ``with_confidence``) and
    the rows whose confidences underflowed (to redo in log space); float64 arrays in."""
    batch, length, _ = em.shape
    paths = np.zeros((batch, length), dtype=np.int64)
    confidence = np.zeros((batch, length))
    em, trans, start, end = (_exact(x, np.float64) for x in (em, trans, start, end))
    failed = kernel(em, _exact(lengths, np.int64), trans, start, end, bool(with_confidence), paths, confidence, UNDERFLOW)
    if not with_confidence:
        return paths, None, failed
    return paths, confidence.astype(np.float32), failed


def best_paths(crf: CRF, emissions: torch.Tensor, lengths: torch.Tensor,
               with_confidence: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``crf``'s :meth:`~textorch.models.crf.CRF.best_paths_with_confidence` on the CPU, for rows of
    ``lengths`` (>= 1, a CPU tensor): :func:`cpu_best_paths_of_arrays`, which never reads past a
    row's length, so ``emissions`` may hold anything there (and be a strided view)."""
    if emissions.dim() != 3 or emissions.size(2) != crf.num_tags or lengths.shape != emissions.shape[:1]:
        raise ValueError(f"emissions must be (batch, length, {crf.num_tags}) with one length per row, got "
                         f"{tuple(emissions.shape)} and {tuple(lengths.shape)} lengths")
    paths, confidence = cpu_best_paths_of_arrays(
        emissions.detach().float().numpy(), lengths.numpy(), crf.transitions.detach().numpy(),
        crf.start_transitions.detach().numpy(), crf.end_transitions.detach().numpy(), with_confidence,
    )
    return torch.from_numpy(paths), None if confidence is None else torch.from_numpy(confidence)


def cpu_best_paths_of_arrays(
    emissions: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray,
    with_confidence: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Best tag ids ``(B, L)`` (0 beyond each length) and ``P(y_t = path_t | x)`` ``(B, L)``
    float32 (None with ``with_confidence=False``) for NumPy arrays: the CPU's one decoding kernel,
    shared by the PyTorch and ONNX engines.

    The reference recursions (:mod:`textorch.models.crf`), in float64, take over where the kernel
    cannot: for the rows whose scores are so far apart that its scaled recursion underflows, and
    for every row where Numba is missing or switched off. Values past each row's length are never read."""
    em = emissions.astype(np.float64, copy=False)
    trans, start, end = (a.astype(np.float64, copy=False) for a in (trans, start, end))
    lengths = np.asarray(lengths)
    kernel = compiled_decoder()
    if kernel is None:
        return _reference_best_paths(em, lengths, trans, start, end, with_confidence)
    paths, confidence, failed = decode(kernel, em, lengths, trans, start, end, with_confidence)
    if confidence is not None and failed.any():
        rows = np.flatnonzero(failed)
        confidence[rows] = _reference_best_paths(em[rows], lengths[rows], trans, start, end, True, paths[rows])[1]
    return paths, confidence


def _reference_best_paths(
    em: np.ndarray, lengths: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray, with_confidence: bool,
    paths: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`cpu_best_paths_of_arrays` by the reference CRF's recursions in log space, on NumPy
    arrays (:mod:`textorch.models.crf_arrays`), for ``paths`` when given (confidences of the
    kernel's paths), else for the Viterbi paths."""
    chosen = viterbi_paths(em, lengths, trans, start, end) if paths is None else paths
    if not with_confidence:
        return chosen, None
    return chosen, path_posteriors(em, lengths, trans, start, end, chosen)
