"""Python's cyclic garbage collector held off for the length of a block, for a process that
owns its state: the ``seq tag`` and ``seq eval`` commands use it, the library never does.

A tagging call over a file allocates container objects by the ten thousand and frees them by
reference counting (none is in a cycle), yet the collector's allocation counter keeps firing,
and now and then a full collection walks every object of the process, torch's included. A
command that only tags may skip that; a library call must not switch off a collector that the
program around it relies on (and in several threads one call could switch it back on under
another). What it saved is in docs/performance.md.

The pause restores the state it found, so a collector that was off stays off.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator
from typing import TypeVar

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block; the collector's state is restored after it,
    exceptions included."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()



def without_gc_pauses(function: F) -> F:
    """``function`` run inside :func:`gc_paused`: for a program's own entry points, never for
    library calls."""

    @functools.wraps(function)
    def paused(*args, **kwargs):
        with gc_paused():
            return function(*args, **kwargs)

    return paused  # type: ignore[return-value]
