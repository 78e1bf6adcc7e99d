"""Every CPU fast path against its general route, in one process, alternating.

Each fast path is switched off in-process through the CPU routes (:mod:`textorch.models.cpu_routes`:
``FAST.without(path)`` as the labelers' ``routes``, and current for the training row), so that the
general route runs (:data:`PATHS`, named as the fields of ``CpuRoutes``); nothing is patched. Both
variants are timed in turn (on, off, on, off, ...) on the rows of the benchmark suite it acts on:
the three seed-1 BiLSTM-CRF models (CoNLL-2003, GROBID name-header and date) at batch 32 and 256
over their test files, 300 one-sequence calls over new tokens and over tokens seen before, and a
short training row (optimizer steps on a CoNLL-2003 subset). Alternating in one process keeps a
second job on the machine from favouring either.

    python -m benchmarks fast_path_ab --pairs 7 --first-call 3 [--paths laid_out_lstm ...]

Why: a fast path stays only while it earns its keep against its general route
(docs/architecture.md, "One owner of the CPU routes"); this is the measure, for the paths there
are and for a new one (its ``CpuRoutes`` field added to :data:`PATHS`).

Prints a table (median on/off in ms, gain = off / on, min in brackets) and writes
``benchmarks/results/fast-paths-<commit>.json``. The CRF kernels' first-call cost is measured in
fresh processes (``--first-call``): the compiled decoder loads Numba on a process's first call.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING
from pathlib import Path

import torch

from benchmarks.suite_models import AB_MODELS, CONLL_TRAIN, ab_test_file, cache_dir, model_dir, require_models, shared_data
from benchmarks.peers.textorch_runner import fresh_token_state

if TYPE_CHECKING:
    from textorch.models.cpu_routes import CpuRoutes

MODELS = {name: (str(model_dir(name)), str(ab_test_file(name))) for name in AB_MODELS}
"""The suite's seed-1 models and their test files (``python -m benchmarks prepare`` builds the models)."""
TRAIN_FILE = str(shared_data(CONLL_TRAIN))
CACHE_DIR = str(cache_dir())
ONE_SEQUENCE_CALLS = 300
INFERENCE_ROWS = ("batch32", "batch256", "one-new", "one-seen")


def routes_for(path: str | None) -> "CpuRoutes":
    """The routes with fast path ``path`` off (None: every path on)."""
    from textorch.models.cpu_routes import FAST

    return FAST if path is None else FAST.without(path)


# Where each path acts: the rows worth timing it on.
PATHS: dict[str, tuple[str, ...]] = {
    "laid_out_lstm": INFERENCE_ROWS,
    "row_buckets": ("batch32", "batch256"),  # training: kernels warm after one pass
    "batch_groups": ("batch32", "batch256"),
    "char_length_groups": ("batch32", "batch256", "train"),
    "crf_kernel": INFERENCE_ROWS,
    "one_sequence": INFERENCE_ROWS,
}


class Rows:
    """The models, their test sequences and the training data, loaded once."""

    def __init__(self, train_sequences: int, train_steps: int) -> None:
        from textorch.data.batching import bucketed_batches
        from textorch.data.readers import read_labelled
        from textorch.tagging.labeler import SequenceLabeler

        self.labelers = {name: SequenceLabeler.load(model, cache_dir=CACHE_DIR, engine="torch") for name, (model, _) in MODELS.items()}
        self.tests = {name: list(read_labelled(test).sequences) for name, (_, test) in MODELS.items()}
        conll = self.labelers["conll"]
        train = list(read_labelled(TRAIN_FILE).sequences)[:train_sequences]
        self.train_data = conll.encode(train, with_labels=True)
        batches = bucketed_batches(self.train_data.lengths(), 32, 1, 1, 20)
        self.train_batches = [self.train_data.batch(b) for b in (batches * 10)[:train_steps]]
        self.train_model = copy.deepcopy(conll.model)
        self.optimizer = torch.optim.Adam(self.train_model.parameters(), lr=1e-3)

    def run(self, model: str, row: str, routes: "CpuRoutes") -> float:
        """Seconds of one pass of ``row`` under ``routes`` (a new-token row's fresh state is made
        off the clock)."""
        from textorch.models.cpu_routes import taking

        if row == "train":
            with taking(routes):  # training is no tagging call: the routes are made current for it
                return self._train()
        labeler, sequences = self.labelers[model], self.tests[model]
        labeler.routes = routes
        if row == "one-new":
            fresh_token_state(labeler, CACHE_DIR)
        started = time.perf_counter()
        if row.startswith("batch"):
            labeler.predict(sequences, batch_size=int(row[5:]))
        else:
            for sequence in sequences[:ONE_SEQUENCE_CALLS]:
                labeler.predict([sequence])
        return time.perf_counter() - started

    def _train(self) -> float:
        model = self.train_model
        model.train()
        started = time.perf_counter()
        for batch in self.train_batches:
            self.optimizer.zero_grad(set_to_none=True)
            model(batch).loss.mean().backward()
            self.optimizer.step()
        return time.perf_counter() - started


def ab(rows: Rows, path: str, model: str, row: str, pairs: int) -> dict:
    """On/off times of ``pairs`` alternating passes (after one warm-up pass each)."""
    on: list[float] = []
    off: list[float] = []
    for i in range(pairs + 1):
        first_on = i % 2 == 0
        for variant in ((True, False) if first_on else (False, True)):
            t = rows.run(model, row, routes_for(None if variant else path))
            if i:
                (on if variant else off).append(t)
    med_on, med_off = statistics.median(on), statistics.median(off)
    return {"path": path, "model": model, "row": row, "on_ms": [t * 1e3 for t in on], "off_ms": [t * 1e3 for t in off],
            "median_on_ms": med_on * 1e3, "median_off_ms": med_off * 1e3, "min_on_ms": min(on) * 1e3,
            "min_off_ms": min(off) * 1e3, "gain": med_off / med_on}


FIRST_CALL = """
import os, sys, time
t0 = time.perf_counter()
import torch; torch.set_num_threads(1)
from textorch.data.readers import read_labelled
from textorch.tagging.labeler import SequenceLabeler
labeler = SequenceLabeler.load(sys.argv[1], cache_dir=sys.argv[3], engine="torch")
sequences = list(read_labelled(sys.argv[2]).sequences)
started = time.perf_counter()
labeler.predict(sequences, batch_size=32)
first = time.perf_counter() - started
started = time.perf_counter()
labeler.predict(sequences, batch_size=32)
print(first, time.perf_counter() - started)
"""


def first_call(repeats: int) -> list[dict]:
    """A fresh process's first tagging call (date and CoNLL-2003, batch 32): the compiled CRF
    decoder loaded on that call against a process without it (``TEXTORCH_DISABLE_NUMBA=1``:
    the decoder that stands in), alternating."""
    results = []
    for model in ("date", "conll"):
        times: dict[str, list[tuple[float, float]]] = {"numba": [], "no-numba": []}
        for i in range(repeats):
            for kernel in (("numba", "no-numba") if i % 2 == 0 else ("no-numba", "numba")):
                env = dict(os.environ, TEXTORCH_DISABLE_NUMBA="1" if kernel == "no-numba" else "0")
                code = FIRST_CALL if kernel == "no-numba" else FIRST_CALL.replace(
                    "started = time.perf_counter()\nlabeler.predict", "started = time.perf_counter()\n"
                    "from textorch.models.cpu_decoder import preload; preload()\nlabeler.predict", 1)
                out = subprocess.run([sys.executable, "-c", code, *MODELS[model], CACHE_DIR], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                times[kernel].append((float(out[0]), float(out[1])))
        for kernel, pairs in times.items():
            results.append({"model": model, "kernel": kernel,
                            "first_call_ms": statistics.median(p[0] for p in pairs) * 1e3,
                            "second_call_ms": statistics.median(p[1] for p in pairs) * 1e3})
    return results


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent).stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--paths", nargs="*", default=list(PATHS), choices=list(PATHS))
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--train-sequences", type=int, default=2000)
    parser.add_argument("--train-steps", type=int, default=40)
    parser.add_argument("--first-call", type=int, default=0, help="fresh processes per CRF kernel (0: skip)")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    require_models(list(MODELS))
    torch.set_num_threads(1)
    from textorch.models.cpu_decoder import preload

    preload()
    rows = Rows(args.train_sequences, args.train_steps)
    load_before = os.getloadavg()
    results = []
    print(f"{'path':22} {'model':12} {'row':9} {'on ms':>16} {'off ms':>16} {'gain':>6}", flush=True)
    for path in args.paths:
        for row in PATHS[path]:
            for model in (["conll"] if row == "train" else args.models):
                r = ab(rows, path, model, row, args.pairs)
                results.append(r)
                print(f"{path:22} {model:12} {row:9} {r['median_on_ms']:8.1f} ({r['min_on_ms']:6.1f}) "
                      f"{r['median_off_ms']:8.1f} ({r['min_off_ms']:6.1f}) {r['gain']:6.2f}", flush=True)
    first = first_call(args.first_call) if args.first_call else []
    for r in first:
        print(f"first call {r['model']:12} {r['kernel']:8} {r['first_call_ms']:8.1f} ms, second {r['second_call_ms']:8.1f} ms")
    load_after = os.getloadavg()
    print(f"load average before {load_before}, after {load_after}")
    output = Path(args.output or Path(__file__).resolve().parents[1] / "results" / f"fast-paths-{_commit()}.json")
    output.write_text(json.dumps({"commit": _commit(), "pairs": args.pairs, "load_before": load_before,
                                  "load_after": load_after, "ab": results, "first_call": first}, indent=1) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
