"""Timing and reporting shared by delft_runner.py and textorch_runner.py.

Standard library only: the DeLFT runner imports it from DeLFT's venv, where textorch is not
installed. Both runners time tagging with the same function, so neither gets a kinder clock.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

MAX_LOOPS = 1000


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


ALLOCATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
"""glibc's environment variables for its mmap and trim thresholds, which the suite
sets alike for every process of both systems (``suite_runner.allocator_env``)."""


def emit(payload: dict, threads: int) -> None:
    """The one result line a runner prints; the orchestrator reads the last such line. It
    carries the allocator settings the process ran under, so a result shows that both
    systems had the same."""
    payload.setdefault("threads", threads)
    payload.setdefault("peak_rss_mb", peak_rss_mb())
    payload.setdefault("allocator", {name: os.environ.get(name) for name in ALLOCATOR_VARIABLES})
    print("BENCH_JSON " + json.dumps(payload), flush=True)


def training_speeds(lengths: Sequence[int], epoch_s: Sequence[float], whole_s: float) -> dict:
    """A training run's measures, one definition for both runners: tokens per epoch are the
    training set's as read (whatever either system cuts or truncates), ``epoch_s`` each
    epoch's loop over its training batches, ``whole_s`` the whole training call."""
    tokens, epochs = int(sum(lengths)), len(epoch_s)
    return {"epochs": epochs, "n_train_sequences": len(lengths), "n_train_tokens": tokens,
            "epoch_s": list(epoch_s), "epochs_s": sum(epoch_s), "whole_s": whole_s,
            "train_tokens_per_s": tokens * epochs / max(sum(epoch_s), 1e-9),
            "whole_tokens_per_s": tokens * epochs / max(whole_s, 1e-9)}


def write_predictions(path: str | None, gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> None:
    """The test set's gold and predicted labels, sequence by sequence in file order, for the
    orchestrator to score both systems with one scorer (``f1_bootstrap``). A prediction
    shorter than its gold sequence (DeLFT truncates at its maximum length when tagging) is
    completed with ``O``, which is what an untagged token means."""
    if path is None:
        return
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sequences but {len(pred)} predicted")
    completed = [list(p) + ["O"] * (len(g) - len(p)) for g, p in zip(gold, pred)]
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"gold": [list(g) for g in gold], "pred": completed}, out)


def repeat_seconds(fn: Callable[[], object], repeats: int, min_seconds: float,
                   prepare: Callable[[], object] | None = None) -> tuple[list[float], int]:
    """The time of one ``fn()`` call in each of ``repeats`` repeats, and the loops per repeat.

    A first untimed call warms the path (allocations, lazily built objects). When one call is
    shorter than ``min_seconds``, each repeat loops over it so that timer resolution and
    scheduler noise stay small next to what is measured (tiny GROBID test sets tag in
    milliseconds).

    ``prepare`` runs before every call, the warm-up included, outside the clock: each call is
    then timed on its own and a repeat is the mean of its loops' calls. It is how a system's
    state is reset between calls (see :func:`tagging_rows`) without the reset's cost
    entering the measure.
    """
    def once() -> float:
        if prepare is not None:
            prepare()
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started

    first = once()
    loops = 1 if first >= min_seconds else min(MAX_LOOPS, math.ceil(min_seconds / max(first, 1e-6)))
    times = []
    for _ in range(repeats):
        if prepare is not None:
            times.append(sum(once() for _ in range(loops)) / loops)
            continue
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


def no_state() -> None:
    """The fresh state of a system that keeps nothing across calls (DeLFT: it reads its LMDB
    store for every token of every call): nothing to reset, but the same clock is used."""


def tagging_rows(
    tag: Callable[[Sequence, int], object],
    sequences: Sequence,
    lengths: Sequence[int],
    batch_sizes: Sequence[int],
    small_limit: int,
    repeats: int,
    min_seconds: float,
    fresh: Callable[[], object] = no_state,
    seen_rows: bool = True,
) -> dict:
    """Tokens/s of ``tag(sequences, batch_size)`` per batch size, and of one call per sequence.

    Batch sizes below 8 and the stream of one-sequence calls use the first ``small_limit``
    sequences only, so that a slow peer cannot make the suite overrun its time budget.

    ``fresh`` gives the system a state that has met no token yet (every cross-call memory of
    tokens emptied: word vectors gathered, character ids, character-encoder outputs); it runs
    before every timed pass, outside the clock (:func:`repeat_seconds`), so these rows
    measure new tokens. Within a pass of the stream, a token met by an earlier call of the
    same pass is known, as in a server that starts from nothing. ``seen_rows`` adds
    ``stream_seen``: the stream again, its tokens all met before (no reset): a server that
    has seen these tokens.
    """
    rows = {}
    n_small = min(small_limit, len(sequences))
    small = sequences[:n_small]
    for batch_size in batch_sizes:
        data, n = (small, n_small) if batch_size < 8 else (sequences, len(sequences))
        tokens = sum(lengths[:n])
        rows[f"batch{batch_size}"] = timing_row(*repeat_seconds(lambda: tag(data, batch_size), repeats, min_seconds,
                                                                prepare=fresh), n, tokens)

    def stream() -> None:
        for sequence in small:
            tag([sequence], 1)

    tokens = sum(lengths[:n_small])
    rows["stream"] = timing_row(*repeat_seconds(stream, repeats, min_seconds, prepare=fresh), n_small, tokens)
    if seen_rows:
        rows["stream_seen"] = timing_row(*repeat_seconds(stream, repeats, min_seconds), n_small, tokens)
    return rows


def grobid_call_texts(blocks: Sequence[Sequence[str]], per_call: int) -> list[str]:
    """The inputs of GROBID-sized calls: ``per_call`` sequences per text, as GROBID writes them.

    ``blocks`` are the sequences of a labelled GROBID file as raw lines (:func:`read_blocks`).
    GROBID hands its model one string per document: per token one line of the token and its
    feature columns, separated by spaces, without a label, and a blank line after each
    sequence. The last column of each line, the label, is dropped here; the sequences are
    cut into consecutive calls of ``per_call`` (the last call takes what is left), so that
    every test sequence is tagged once per pass.
    """
    if per_call < 1:
        raise ValueError(f"per_call must be at least 1, not {per_call}")
    texts = []
    for start in range(0, len(blocks), per_call):
        sequences = []
        for lines in blocks[start:start + per_call]:
            rows = [line.split()[:-1] for line in lines]
            sequences.append("".join(" ".join(fields) + "\n" for fields in rows if fields))
        texts.append("\n".join(sequences))
    return texts


def grobid_call_rows(call: Callable[[object], object], inputs: Sequence, n_sequences: int, tokens: int,
                     repeats: int, min_seconds: float, fresh: Callable[[], object] = no_state,
                     name: str = "grobid_calls", seen_rows: bool = True) -> dict:
    """Tokens/s of a pass of ``call(x)`` over every ``x`` in ``inputs``, one call per document.

    One untimed pass comes first, so that :func:`repeat_seconds` sizes its loops on a pass
    that builds nothing lazily (DeLFT's first ``tag`` builds its tagger: a pass ten times as
    long, which left two loops a repeat). A pass is timed whole (every call of a document of the test split, one after the other,
    as GROBID tags a corpus); ``fresh`` runs before every pass, outside the clock, as in
    :func:`tagging_rows`, so ``name`` measures new tokens (a token met by an earlier call of
    the same pass is known). ``seen_rows`` adds ``<name>_seen``: the same passes without any
    reset, every token met before.
    """
    def one_pass() -> None:
        for x in inputs:
            call(x)

    fresh()
    one_pass()  # lazily built objects (DeLFT's first tag builds its tagger): not what a pass costs
    rows = {name: timing_row(*repeat_seconds(one_pass, repeats, min_seconds, prepare=fresh), n_sequences, tokens)}
    if seen_rows:
        rows[f"{name}_seen"] = timing_row(*repeat_seconds(one_pass, repeats, min_seconds), n_sequences, tokens)
    return rows


def read_calls(path: str) -> tuple[list[str], int, int, int]:
    """The call texts an orchestrator wrote (:func:`write_calls`): texts, sequences, tokens, per call."""
    with open(path, encoding="utf-8") as source:
        written = json.load(source)
    return written["texts"], written["n_sequences"], written["n_tokens"], written["per_call"]


def write_calls(path: str, blocks: Sequence[Sequence[str]], per_call: int) -> None:
    """One file of call texts read by both runners, so that both tag the very same strings."""
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"texts": grobid_call_texts(blocks, per_call), "n_sequences": len(blocks),
                   "n_tokens": sum(len(lines) for lines in blocks), "per_call": per_call}, out)


def add_calls_command(commands: argparse._SubParsersAction, run: Callable[[argparse.Namespace], None]) -> None:
    """The ``calls`` command of both runners, with the same options, so that the orchestrator
    starts both the same way (``suite_tagging.measure_grobid_calls``)."""
    p = commands.add_parser("calls")
    p.add_argument("--model", required=True)
    p.add_argument("--calls", required=True, help="JSON of the call texts (write_calls)")
    p.add_argument("--max-sequence-length", type=int, required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=0.5, help="loop short passes to last at least this long")
    p.set_defaults(run=run)


def read_text(path: str | Path) -> str:
    """A file's text, through gzip when its name ends in ``.gz`` (GROBID's big corpora ship so)."""
    if str(path).endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as stream:
            return stream.read()
    return Path(path).read_text(encoding="utf-8")


def read_blocks(path: str | Path) -> list[list[str]]:
    """The sequences of a GROBID file as lists of their raw non-blank lines (a blank or space-only
    line ends a sequence): how the suite cuts a corpus into splits, and reads them back. Lines end
    at newlines only, as Wapiti reads them (``str.splitlines`` would also cut at form feeds and
    other separators a token may hold)."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in read_text(path).split("\n"):
        line = line.removesuffix("\r")
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks
