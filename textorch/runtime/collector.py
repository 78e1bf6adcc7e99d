"""Python's cyclic garbage collector paused for one command, when the user asks for it.

A streamed tagging run allocates short-lived objects (the sequences, their fields, the answers)
by the million; every few thousand allocations Python's cyclic collector wakes, and its full
passes walk every object the process holds, torch's and Numba's hundreds of thousands
included. Those passes free almost nothing (reference counting frees the run's objects), yet
they are a large share of a run over many short sequences (docs/performance.md). Pausing the
collector is a process setting, so it is the command line's to offer (``textorch
--pause-collector``), never a default: memory in reference cycles is then freed only once the
command ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state before it, after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
