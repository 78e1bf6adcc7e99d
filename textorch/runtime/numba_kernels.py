"""One way to compile a Numba kernel: cached where a cache can be written, tried once, or None.

The CRF decoder and the template rows each have a NumPy route and a compiled one; both choose the
same way, so the switch, the cache fallback and the failure handling live here once.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable

logger = logging.getLogger(__name__)

DISABLE_ENV = "TEXTORCH_DISABLE_NUMBA"
"""Set (to anything but 0) to keep every kernel on its NumPy route."""


def compile_kernel(function: Callable, try_once: Callable[[Callable], object], what: str) -> Callable | None:
    """``function`` compiled by Numba (or loaded from Numba's cache), after ``try_once(kernel)``
    ran it on a tiny input so that a failure shows here, not mid-call; None where Numba is
    missing, fails, or :data:`DISABLE_ENV` is set (the caller's NumPy route then runs).
    ``what`` names the kernel in the warning a failure gives."""
    if os.environ.get(DISABLE_ENV, "").strip() not in ("", "0"):
        return None
    try:
        import numba
    except ImportError:
        logger.info("numba is not installed: %s runs with NumPy (slower)", what)
        return None
    try:
        try:
            kernel = numba.njit(cache=True, nogil=True)(function)
        except RuntimeError:  # no writable cache location: compiled in every process
            kernel = numba.njit(nogil=True)(function)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a cache that cannot be written warns
            try_once(kernel)
    except Exception as error:  # noqa: BLE001 - any Numba failure leaves the NumPy route
        logger.warning("numba could not compile %s (%s): NumPy runs it", what, error)
        return None
    return kernel
