"""Timing and reporting shared by delft_runner.py and textorch_runner.py.

Standard library only: the DeLFT runner imports it from DeLFT's venv, where textorch is not
installed. Both runners time tagging with the same function, so neither gets a kinder clock.
"""

from __future__ import annotations

import json
import math
import resource
import statistics
import time
from collections.abc import Callable, Sequence

MAX_LOOPS = 1000


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(payload: dict, threads: int) -> None:
    """The one result line a runner prints; the orchestrator reads the last such line."""
    payload.setdefault("threads", threads)
    payload.setdefault("peak_rss_mb", peak_rss_mb())
    print("BENCH_JSON " + json.dumps(payload), flush=True)


def repeat_seconds(fn: Callable[[], object], repeats: int, min_seconds: float) -> tuple[list[float], int]:
    """The time of one ``fn()`` call in each of ``repeats`` repeats, and the loops per repeat.

    A first untimed call warms the path (allocations, lazily built objects). When one call is
    shorter than ``min_seconds``, each repeat loops over it so that timer resolution and
    scheduler noise stay small next to what is measured (tiny GROBID test sets tag in
    milliseconds).
    """
    started = time.perf_counter()
    fn()
    first = time.perf_counter() - started
    loops = 1 if first >= min_seconds else min(MAX_LOOPS, math.ceil(min_seconds / max(first, 1e-6)))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - started) / loops)
    return times, loops


def timing_row(times: list[float], loops: int, n_sequences: int, tokens: int) -> dict:
    """One tagging row: the median of the repeats, and every repeat (the spread a reader may
    want to see next to a ratio: this machine varies by 10-15 % between processes)."""
    seconds = statistics.median(times)
    return {"n_sequences": n_sequences, "n_tokens": tokens, "tag_s": seconds, "loops": loops,
            "tokens_per_s": tokens / seconds, "repeats_s": times}


def tagging_rows(
    tag: Callable[[Sequence, int], object],
    sequences: Sequence,
    lengths: Sequence[int],
    batch_sizes: Sequence[int],
    small_limit: int,
    repeats: int,
    min_seconds: float,
    forget: Callable[[], object] | None = None,
) -> dict:
    """Tokens/s of ``tag(sequences, batch_size)`` per batch size, and of one call per sequence.

    Batch sizes below 8 and the stream of one-sequence calls use the first ``small_limit``
    sequences only, so that a slow peer cannot make the suite overrun its time budget.
    ``forget`` (a system's caches across calls) runs before every timed pass, so that no pass
    profits from having seen the same tokens in the one before; with it, ``stream_seen`` is the
    stream once more without forgetting: a server that has met these tokens before.
    """
    rows = {}
    n_small = min(small_limit, len(sequences))
    small = sequences[:n_small]
    start = forget or (lambda: None)
    for batch_size in batch_sizes:
        data, n = (small, n_small) if batch_size < 8 else (sequences, len(sequences))
        tokens = sum(lengths[:n])
        rows[f"batch{batch_size}"] = timing_row(*repeat_seconds(lambda: (start(), tag(data, batch_size)), repeats,
                                                                min_seconds), n, tokens)

    def stream(begin: Callable[[], object]) -> None:
        begin()
        for sequence in small:
            tag([sequence], 1)

    tokens = sum(lengths[:n_small])
    names = [("stream", start)] + ([("stream_seen", lambda: None)] if forget is not None else [])
    for name, begin in names:
        rows[name] = timing_row(*repeat_seconds(lambda: stream(begin), repeats, min_seconds), n_small, tokens)
    return rows
