"""Where a BiLSTM-CRF tagging call spends its time: the network's kernels against everything else.

    .venv/bin/python -m benchmarks tagging_anatomy --model DIR --test FILE [--batch-sizes 32 256]
        [--stream 300] [--suite-json benchmarks/results/latest.json --job date-BidLSTM_CRF]

For a saved model on the CPU (PyTorch engine, fp32, with confidences, as the suite's default
rows): the time of a whole tagging pass over the test file at each batch size, and of one call in
a stream of one-sequence calls (new tokens: character vectors emptied before the stream, as the
suite times it; and tokens seen before), each the median of ``--repeats`` passes. Within the
same passes, the time spent inside the calls that do the arithmetic: oneDNN's recurrent layer
(``onednn_lstm._run``: the word and character BiLSTMs) and the dense layers
(``torch.nn.functional.linear``), timed by wrapping those two functions (a clock read around each call);
"the rest" is the whole time less those (encoding, batching, small operators, the CRF, Python).
Operators per call come from one more pass under ``torch.profiler``. The machine's speed may
drift between passes: each pass's shares are its own, and the medians are taken per column.

Why: the speed issue's targets are ratios to DeLFT's time on the same data. With
``--suite-json`` (a ``bench_vs_delft.py`` result) and ``--job``, each row also shows the share
of the call's time a target leaves (the suite's ratio textorch / DeLFT over the target ratio)
and how many times faster everything but the kernels would have to run to meet it, the kernels
unchanged: where the kernels alone take more than that share, nothing outside them can meet
the target. The suite's rows and the issue's targets are read through ``bench_table`` (its
labels, ``issue_target``), so the two cannot drift apart. Writes
``results/anatomy-<model dir name>.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.peers import bench_table  # noqa: E402
from benchmarks.common import machine, print_table, write_json  # noqa: E402

from textorch.data.readers import read_labelled  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.runtime.malloc_tuning import keep_freed_memory  # noqa: E402
from textorch.models import onednn_lstm  # noqa: E402


class KernelClock:
    """Time spent inside the recurrent and dense kernels' calls, by wrapping the two functions
    every such call goes through (restored on exit)."""

    def __init__(self) -> None:
        self.seconds = {"lstm": 0.0, "dense": 0.0}
        self._originals: list[tuple[object, str, Callable]] = []

    def __enter__(self) -> "KernelClock":
        for module, name, kind in ((onednn_lstm, "_run", "lstm"), (torch.nn.functional, "linear", "dense")):
            original = getattr(module, name)
            self._originals.append((module, name, original))
            setattr(module, name, self._timed(original, kind))
        return self

    def __exit__(self, *exc: object) -> None:
        for module, name, original in self._originals:
            setattr(module, name, original)

    def _timed(self, function: Callable, kind: str) -> Callable:
        seconds = self.seconds

        def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[kind] += time.perf_counter() - started

        return timed


def timed_passes(work: Callable[[], None], repeats: int) -> dict[str, float]:
    """Medians over ``repeats`` passes (after one warm-up) of the whole pass and of its kernels."""
    work()  # warm-up: kernels built, caches filled
    passes = []
    with KernelClock() as clock:
        for _ in range(repeats):
            clock.seconds.update(lstm=0.0, dense=0.0)
            started = time.perf_counter()
            work()
            total = time.perf_counter() - started
            passes.append({"total_s": total, "lstm_s": clock.seconds["lstm"], "dense_s": clock.seconds["dense"],
                           "kernels_share": (clock.seconds["lstm"] + clock.seconds["dense"]) / total})
    return {key: statistics.median(p[key] for p in passes) for key in passes[0]}


def operator_calls(work: Callable[[], None]) -> int:
    """Operators one pass runs (``torch.profiler``; counts do not depend on the machine's speed)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        work()
    return sum(event.count for event in profiler.key_averages())


TAGGING_KEYS = {label: key for key, label in [*bench_table.FIRST_METHOD_LABELS.items(), *bench_table.TAGGING]}
"""The suite's tagging rows (textorch's default set-up) by label, to their keys: ``batch32``,
``stream`` (one-sequence calls, new tokens), ``stream_seen`` (tokens seen before), ...; the
labels of results files of the first method too."""


def read_suite(path: Path, job_key: str) -> tuple[dict[str, float], dict]:
    """textorch / DeLFT of ``job_key``'s tagging rows in a ``bench_vs_delft.py`` result, by key
    (:data:`TAGGING_KEYS`), and the job (task, architecture) that the issue's targets depend on."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        rows, runs = payload["rows"], payload["train_runs"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"{path}: not a readable bench_vs_delft.py result ({error})") from None
    ratios = {TAGGING_KEYS[row["metric"]]: row["ratio"] for row in rows
              if row.get("job") == job_key and row.get("metric") in TAGGING_KEYS and row.get("ratio") is not None}
    job = next((run for run in runs if run.get("key") == job_key), None)
    if not ratios or job is None:
        known = sorted({run.get("key") for run in runs} - {None})
        raise SystemExit(f"{path}: no tagging ratios for job {job_key!r} (jobs there: {', '.join(known) or 'none'})")
    return ratios, job


def row_for(name: str, tokens: int, timing: dict[str, float], operators: int, calls_per_pass: int,
            suite_ratio: float | None, target: float | None) -> dict:
    """One table row, times per call (``calls_per_pass`` calls in a pass) in milliseconds.

    The suite's ratio says what share of today's call time a target allows (ratio / target: the
    suite pairs the two systems in rounds, so this holds however fast the machine runs now);
    the kernels' share of the call is measured here."""
    per_call = 1e3 / calls_per_pass
    share = timing["kernels_share"]
    row = {
        "setting": name,
        "tokens_per_call": round(tokens / calls_per_pass, 1),
        "ms_per_call": timing["total_s"] * per_call,
        "lstm_kernels_ms": timing["lstm_s"] * per_call,
        "dense_kernels_ms": timing["dense_s"] * per_call,
        "rest_ms": timing["total_s"] * (1 - share) * per_call,
        "kernels_share": share,
        "operators_per_call": round(operators / calls_per_pass),
    }
    if suite_ratio is not None and target is not None:
        allowed = min(suite_ratio / target, 1.0)
        rest_allowed = allowed - share
        row.update({
            "suite_ratio": suite_ratio, "target": f"{target:g}x", "allowed_share": allowed,
            # how many times faster the rest of the call must get, kernels unchanged (None: cannot)
            "rest_must_speed_up": (1 - share) / rest_allowed if rest_allowed > 0 else None,
        })
    return row


NEARLY_ALL = 10.0
"""A rest that must run more than this many times faster: the kernels take nearly all the time
the target leaves (at 1,000x the kernels fill it to within a rounding error)."""


def speed_up_verdict(row: dict) -> str:
    """How the table shows ``rest_must_speed_up`` (the JSON keeps the number)."""
    needed = row["rest_must_speed_up"]
    if needed is None:
        return "kernels alone exceed it"
    if needed > NEARLY_ALL:
        return f"kernels take nearly all of it (the rest {needed:,.0f}x faster)"
    return f"{needed:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a saved BiLSTM-CRF model directory")
    parser.add_argument("--test", required=True, help="labelled test file (CoNLL or GROBID columns)")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[32, 256])
    parser.add_argument("--stream", type=int, default=300, help="one-sequence calls: the first N sequences (0: none)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default=None, help="word-vector cache (as for textorch seq tag)")
    parser.add_argument("--suite-json", type=Path, default=None, help="a bench_vs_delft.py result: its ratios to DeLFT")
    parser.add_argument("--job", default=None, help="its job key, e.g. date-BidLSTM_CRF")
    args = parser.parse_args()
    if (args.suite_json is None) != (args.job is None):
        parser.error("--suite-json and --job go together")
    ratios, job = read_suite(args.suite_json, args.job) if args.job else ({}, None)
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as textorch's command line and the suite's runner: no page faults of freed memory

    labeler = SequenceLabeler.load(args.model, cache_dir=args.cache_dir)
    labeler.preload_crf_decoder()  # as the suite and the server do
    sequences = read_labelled(args.test, None).sequences
    cache = labeler.token_vector_cache

    def tag_file(batch_size: int) -> Callable[[], None]:
        def work() -> None:
            cache.clear()  # as the suite: no pass profits from the one before
            labeler.predict(sequences, batch_size=batch_size)
        return work

    stream = sequences[: args.stream]

    def tag_stream(cold: bool) -> Callable[[], None]:
        def work() -> None:
            if cold:
                cache.clear()
            for sequence in stream:
                labeler.predict([sequence], batch_size=1)
        return work

    file_tokens = sum(len(s.tokens) for s in sequences)
    runs = [(f"batch {b}", f"batch{b}", file_tokens, tag_file(b), 1) for b in args.batch_sizes]
    if stream:
        stream_tokens = sum(len(s.tokens) for s in stream)
        runs += [("one-sequence calls, new tokens", "stream", stream_tokens, tag_stream(cold=True), len(stream)),
                 ("one-sequence calls, tokens seen before", "stream_seen", stream_tokens, tag_stream(cold=False),
                  len(stream))]
    rows = []
    for name, key, tokens, work, calls in runs:
        # Tokens seen before are held to the one-sequence target too (the issue sets none apart).
        target = bench_table.issue_target(job, "stream" if key == "stream_seen" else key) if job else None
        rows.append(row_for(name, tokens, timed_passes(work, args.repeats), operator_calls(work), calls,
                            ratios.get(key), target))
    columns = ["setting", "tokens_per_call", "ms_per_call", "lstm_kernels_ms", "dense_kernels_ms", "rest_ms",
               "kernels_share", "operators_per_call"]
    if ratios:
        columns += ["suite_ratio", "target", "allowed_share", "rest_must_speed_up"]
    shown = [{**row, "rest_must_speed_up": speed_up_verdict(row)} if "allowed_share" in row else row for row in rows]
    print_table(shown, columns)
    name = Path(args.model).resolve().name
    path = write_json(f"anatomy-{name}", {
        "machine": machine(), "command": " ".join(sys.argv), "model": str(args.model), "test": str(args.test),
        "n_sequences": len(sequences), "suite_json": None if args.suite_json is None else str(args.suite_json),
        "job": args.job, "rows": rows,
    })
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
