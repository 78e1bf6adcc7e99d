"""glibc's allocator told to keep freed memory for the next call, in a process that asks for it.

A tagging call allocates and frees tensors of a few megabytes (a padded batch of long GROBID
headers, the character table of a file). glibc serves blocks above its mmap threshold with
fresh pages and gives them back to the kernel when freed, and trims the top of its heap as soon
as enough is free there; the next call then faults the same memory back in, zero-filled. Those
faults cost kernel time on every call, and how many there are depends on the process's heap
history, so two processes time the same call differently. With glibc's thresholds set where its
own rules would take them at most (below), that memory stays in the heap from one call to the
next: tagging calls take fewer faults and time more steadily, for a peak memory barely higher;
training is not affected.

What it saves stays under the project's 10 % rule for a default (docs/performance.md, "Measurements
moved out of the code"), so nothing calls it unasked: ``textorch --tune-allocator ...`` does, for
that command's process (the server included); a Python program may call
:func:`keep_freed_memory` itself; the benchmark runners give the same values to every process of
both systems through glibc's environment variables. PyTorch's own CPU launcher gets the same
effect by preloading jemalloc or tcmalloc. Importing textorch changes nothing. Left alone when
the user set glibc's malloc options already (``GLIBC_TUNABLES`` or the ``MALLOC_*_`` threshold
variables), and on other C libraries (musl, macOS, Windows), where nothing is done.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

logger = logging.getLogger(__name__)

MMAP_THRESHOLD = 32 * 2**20
"""Blocks below this come from the heap. glibc's own threshold starts at 128 KB and moves up to
this (its 64-bit maximum) as large blocks are freed: so no block that glibc would ever keep in
the heap is mapped afresh here."""

TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""Free memory at the top of the heap kept before any is given back to the kernel: glibc's own
rule (twice the mmap threshold) at that threshold's maximum."""

THRESHOLD_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
"""glibc's older environment variables for the same settings (``GLIBC_TUNABLES`` is the newer way)."""

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3


def _user_chose() -> str | None:
    """Why the user's own settings win, or None."""
    if "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES sets malloc options"
    chosen = [name for name in THRESHOLD_VARIABLES if name in os.environ]
    return f"{chosen[0]} is set" if chosen else None


def _mallopt_if_ours():  # noqa: ANN202 - a ctypes function
    """glibc's ``mallopt``, or None where the user chose malloc options or the C library is another."""
    reason = _user_chose()
    if reason is not None:
        logger.debug("allocator left as it is: %s", reason)
        return None
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (see the module docstring); True when done."""
    mallopt = _mallopt_if_ours()
    if mallopt is None:
        return False
    # Both, never the trim threshold alone: setting either freezes glibc's moving mmap threshold,
    # and frozen at its 128 KB start every large tensor would be mapped afresh on every call.
    done = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    logger.debug("allocator: mmap threshold %d, trim threshold %d: %s", MMAP_THRESHOLD, TRIM_THRESHOLD,
                 "set" if done else "refused")
    return done


HELD_MMAP_THRESHOLD = 8 * 2**20
"""Blocks from here up are mapped while a training process runs. glibc's own starting value
(128 KB) bounds the heap as well, but then every block a batch allocates is mapped and
zero-filled afresh, which costs training much of its CPU time. From 8 MB up, the blocks that leave
the large holes (a whole template table's gradient, a batch's character tensors) are still mapped,
while a batch's activations of a few megabytes, allocated and freed many times a step, reuse the
heap: most of glibc's own speed, for a bounded heap a little larger than a lower threshold
gives (docs/performance.md, "GROBID's big models", training memory)."""


def bound_heap_growth() -> bool:
    """Hold glibc's mmap threshold at :data:`HELD_MMAP_THRESHOLD` for a training process; True when done.

    glibc raises its threshold each time a mapped block is freed, up to 32 MB, so in a long
    training run blocks of every size from 128 KB to 32 MB move into the heap one after another.
    Batches of changing shapes then leave holes there that the next blocks do not fit, and the
    process grows epoch after epoch while its live tensors stay the same. Held, every block
    above the threshold is mapped when allocated and given back whole when freed.

    A process setting, so the library's training functions never call it: the training commands
    of the command line do (``seq``, ``grobid``, ``ner`` and ``cls`` ``train``/``train-eval``),
    and a Python program may. Left alone where the user chose malloc options (see
    :func:`keep_freed_memory`) and on other C libraries."""
    mallopt = _mallopt_if_ours()
    if mallopt is None:
        return False
    done = mallopt(_M_MMAP_THRESHOLD, HELD_MMAP_THRESHOLD) == 1
    logger.debug("allocator: mmap threshold held at %d: %s", HELD_MMAP_THRESHOLD, "set" if done else "refused")
    return done
