"""Wapiti, GROBID's CRF, as a third system of bench_vs_delft.py: its runs, its whole-file tagging, its table.

GROBID runs every model of its default grobid.yaml on Wapiti, so that CRF is the reference a
GROBID user compares a deep model with. ``bench_vs_delft.py --systems textorch,delft,wapiti
--wapiti PATH`` trains it on the suite's split of every GROBID task and seed (train and
validation files together: Wapiti has no validation set), exactly as GROBID's trainer does
(``wapiti_runner.py``), scores its test predictions with the suite's one scorer, and, per task,
times every system's whole process tagging the same file of about ``--tag-tokens`` tokens (the
first seed's test split repeated). :func:`peer_rows` then sets Wapiti beside textorch and DeLFT:
F1 with the paired bootstrap's interval of each against Wapiti, training time, whole-process
tagging speed, peak memory of the tagging process, model size.
"""

from __future__ import annotations

import hashlib
import statistics
from pathlib import Path

from benchmarks.peers import bench_data
from benchmarks.peers import f1_bootstrap
import numpy as np

SYSTEMS = ("delft", "textorch", "wapiti")
BUILD_HINT = ("build it from GROBID's fork kept in ../shared/peers/wapiti/: "
              "bash ../shared/peers/wapiti/build.sh \"$TMPDIR/wapiti-build\" (prints the binary's path)")
DEFAULT_TAG_TOKENS = 500_000
"""Tokens of the whole-file tagging measure: large enough that start-up (Python and torch imports,
model load) is a small part of the whole process for every system."""


def parse_systems(text: str, wapiti: str | None) -> list[str]:
    """The systems of a run (``--systems``), checked: known names, and a Wapiti binary that runs."""
    systems = [s.strip() for s in text.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        raise SystemExit(f"--systems {text!r}: choose among {', '.join(SYSTEMS)} (comma-separated)")
    if "wapiti" in systems:
        if not wapiti:
            raise SystemExit(f"--systems wapiti needs --wapiti PATH: {BUILD_HINT}")
        if not Path(wapiti).is_file():
            raise SystemExit(f"--wapiti {wapiti}: no such file; {BUILD_HINT}")
    return systems


def template(task: str) -> Path:
    """GROBID's CRF template of a task: ``../shared/data/grobid/TASK/TASK.crf-template``."""
    return bench_data.shared_data(f"grobid/{task}/{task}.crf-template")


def model_path(work: Path, task: str, seed: int) -> Path:
    return work / "models" / "wapiti" / f"{task}-s{seed}.wapiti"


def train_args(work: Path, wapiti: str, task: str, seed: int, files, predictions: Path,
               time_limit: float | None = None, iterations: int | None = None) -> list[str]:
    """``wapiti_runner.py train`` options for one task and seed, on the suite's split files
    (``time_limit``: seconds before its optimisation is stopped, the big models' two hours;
    ``iterations``: wapiti's ``-i`` in place of GROBID's 2000);
    an own corpus's template where it has one (``files.template``), else the shared task's."""
    limit = ["--time-limit", str(time_limit)] if time_limit else []
    limit += ["--iterations", str(iterations)] if iterations else []
    chosen = files.template or template(task)
    return ["train", "--wapiti", wapiti, "--template", str(chosen), "--task", task, "--seed", str(seed),
            *[a for role in ("train", "valid", "test") for a in (f"--{role}", files.textorch[role])],
            "--model", str(model_path(work, task, seed)), "--predictions", str(predictions), "--reuse", *limit]


def write_whole_file(work: Path, task: str, test: Path, tokens: int) -> dict:
    """The file every system tags whole: the test split repeated until it holds at least
    ``tokens`` tokens, written without labels (what GROBID hands its model; textorch and Wapiti
    read it) and with them (DeLFT's runner reads labelled GROBID files)."""
    from benchmarks.peers.runner_common import read_blocks
    from benchmarks.peers.wapiti_runner import write_blocks

    blocks = read_blocks(test)
    per_copy = sum(len(b) for b in blocks)
    if not per_copy:
        raise SystemExit(f"{test}: no sequence to tag")
    copies = -(-tokens // per_copy)
    target = work / "whole-file" / task
    target.mkdir(parents=True, exist_ok=True)
    paths = {"unlabelled": target / "input.txt", "labelled": target / "input-labelled.txt"}
    write_blocks(paths["labelled"], blocks * copies)
    n_tokens = write_blocks(paths["unlabelled"], blocks * copies, labelled=False)
    digest = hashlib.sha1(paths["unlabelled"].read_bytes()).hexdigest()
    return {"paths": {k: str(v) for k, v in paths.items()}, "n_tokens": n_tokens,
            "n_sequences": len(blocks) * copies, "copies": copies, "digest": digest}


def write_one_sequence_file(work: Path, task: str, whole_file: Path, name: str) -> Path:
    """The first sequence of a whole file (its unlabelled or labelled copy), alone in file
    ``name``: a system's time to tag it is its start-up (interpreter or binary, model, first
    call), the fixed cost of every GROBID run."""
    lines: list[str] = []
    with open(whole_file, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                break
            lines.append(line)
    if not lines:
        raise SystemExit(f"{whole_file}: no sequence to tag")
    path = work / "whole-file" / task / name
    path.write_text("".join(lines) + "\n", encoding="utf-8")
    return path


def size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def whole_file_entry(task: str, seed: int, written: dict, measured: dict) -> dict:
    """One results entry (in the ``tagging`` list, recognised by ``kind``): per system its
    processes' wall seconds and peak RSS, its model's size and the job it belongs to."""
    return {"key": f"{task}-whole-file", "kind": "whole_file", "task": task, "seed": seed,
            "n_tokens": written["n_tokens"], "n_sequences": written["n_sequences"], "copies": written["copies"],
            "digest": written["digest"], "systems": measured}


# ------------------------------------------------------------------------------------------ rows
def _pooled_f1(runs: dict[int, dict]) -> float | None:
    counts = [r["test_counts"] for r in runs.values()]
    if not counts:
        return None
    total = sum(np.asarray(c, dtype=np.int64).reshape(-1, 3).sum(axis=0) for c in counts)
    return float(f1_bootstrap.f1(total)) * 100


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _against(other: dict[int, dict], wapiti: dict[int, dict]) -> dict | None:
    """The other system's pooled F1 minus Wapiti's over the seeds both ran on the same test
    sequences, with the paired bootstrap's 95 % interval; None when no seed pairs."""
    seeds = sorted(s for s in set(other) & set(wapiti) if other[s].get("gold_digest") == wapiti[s].get("gold_digest"))
    if not seeds:
        return None
    compared = f1_bootstrap.paired_bootstrap([other[s]["test_counts"] for s in seeds],
                                             [wapiti[s]["test_counts"] for s in seeds])
    return {"value": compared.f1_a, "wapiti": compared.f1_b, "diff": compared.diff, "ci95": [compared.low, compared.high],
            "within_noise": compared.within_noise, "seeds": seeds}


def _whole_files(tagging: list[dict]) -> dict[tuple[str, str], dict]:
    """Whole-file measures by (system, job): Wapiti's job is ``TASK-wapiti``; a pooled table's
    later files complete (or replace) earlier ones. Each carries the file's token count."""
    found: dict[tuple[str, str], dict] = {}
    for entry in tagging:
        if entry.get("kind") == "whole_file":
            for system, measured in entry["systems"].items():
                found[(system, measured["job"])] = {**measured, "n_tokens": entry["n_tokens"], "task": entry["task"]}
    return found


def peer_rows(train_runs: list[dict], tagging: list[dict]) -> list[dict]:
    """Wapiti beside textorch and DeLFT, per task with Wapiti runs and per job of that task
    (textorch's and DeLFT's runs of one architecture and setting): each system's pooled F1 and
    its difference with Wapiti on the seeds both ran, with the paired bootstrap's interval;
    then training time (wall and CPU), whole-file tagging (tok/s, tokens per CPU second), peak
    memory of the tagging process, model size. A task Wapiti alone ran gets Wapiti's rows."""
    rows: list[dict] = []
    whole = _whole_files(tagging)
    for task in dict.fromkeys(r["task"] for r in train_runs if r["system"] == "wapiti"):
        mine = [r for r in train_runs if r["system"] == "wapiti" and r["task"] == task]
        wapiti = {r["seed"]: r for r in mine if r.get("test_counts")}
        per_seed = " / ".join(f"{100 * wapiti[s]['f1_counts']:.2f}" for s in sorted(wapiti))
        jobs = list(dict.fromkeys(r["key"] for r in train_runs if r["task"] == task and r["system"] in ("textorch", "delft")))
        for job in jobs or [None]:
            runs = {s: [r for r in train_runs if r["key"] == job and r["system"] == s] for s in ("textorch", "delft")}
            runs["wapiti"] = mine
            label = f" ({job})" if job else ""
            f1_row = {"task": task, "kind": "f1", "wapiti": _pooled_f1(wapiti),
                      "measure": f"test F1{label}, seeds {_seeds(wapiti)} pooled (Wapiti per seed: {per_seed})"}
            for system in ("textorch", "delft"):
                f1_row[system] = _against({r["seed"]: r for r in runs[system] if r.get("test_counts")}, wapiti)
            rows.append(f1_row)
            rows.append({"task": task, "kind": "seconds",
                         "measure": f"training{label}, median over seeds (s): Wapiti's `wapiti train` process; "
                                    "textorch's and DeLFT's whole training call",
                         **{s: _median([r.get("whole_s") for r in runs[s]]) for s in SYSTEMS}})
            cpu = {s: _median([r.get("train_cpu_s" if s == "wapiti" else "process_cpu_s") for r in runs[s]])
                   for s in SYSTEMS}
            if any(v is not None for v in cpu.values()):
                rows.append({"task": task, "kind": "seconds", **cpu,
                             "measure": f"training{label}, CPU seconds, median over seeds: Wapiti's `wapiti train` "
                                        "process; textorch's and DeLFT's training process (with start-up and "
                                        "scoring the test split)"})
            found = {s: whole[(s, f"{task}-wapiti" if s == "wapiti" else job)] for s in SYSTEMS
                     if (s, f"{task}-wapiti" if s == "wapiti" else job) in whole}
            rows.extend(_whole_file_rows(task, label, found))
    trained = {r["task"] for r in train_runs if r["system"] == "wapiti"}
    for task in dict.fromkeys(m["task"] for m in whole.values()):
        if task not in trained:  # --whole-files-only: the measures of earlier runs' models, no training here
            jobs = {job for (system, job), m in whole.items() if m["task"] == task and system != "wapiti"}
            label = f" ({', '.join(sorted(jobs))})" if jobs else ""
            rows.extend(_whole_file_rows(task, label, {s: m for (s, _), m in whole.items() if m["task"] == task}))
    return rows


def _whole_file_rows(task: str, label: str, found: dict[str, dict]) -> list[dict]:
    """The whole-file rows of one job's systems (``found``: system -> its measures)."""
    if not found:
        return []
    sizes = {m["n_tokens"] for m in found.values()}
    n_tokens = max(sizes)
    note = "" if len(sizes) == 1 else " (files of different sizes: each system's own)"
    rate = {s: m["n_tokens"] / t for s, m in found.items() if (t := _median(m.get("wall_s", [])))}
    rows = [{"task": task, "kind": "rate", **rate,
             "measure": f"tag a {n_tokens:,}-token file{label}, whole process (tok/s){note}"}]
    cpu = {s: m["n_tokens"] / t for s, m in found.items() if (t := _median(m.get("cpu_s", [])))}
    if cpu:
        rows.append({"task": task, "kind": "rate", **cpu,
                     "measure": f"tag a {n_tokens:,}-token file{label}, whole process (tokens per CPU second){note}"})
    startup = {s: t for s, m in found.items() if (t := _median(m.get("startup_wall_s", [])))}
    if startup:
        repeats = max(len(m.get("startup_wall_s", [])) for m in found.values())
        rows.append({"task": task, "kind": "seconds", **startup,
                     "measure": f"start-up{label}: tag a one-sequence file, whole process, median of {repeats} (s)"})
        cpu = {s: t for s, m in found.items() if (t := _median(m.get("startup_cpu_s", [])))}
        rows.append({"task": task, "kind": "seconds", **cpu,
                     "measure": f"start-up{label}: tag a one-sequence file, whole process, CPU seconds"})
    rows.append({"task": task, "kind": "memory", "measure": f"peak RSS of the tagging process{label} (MB)",
                 **{s: max(m["peak_rss_mb"]) for s, m in found.items() if m.get("peak_rss_mb")}})
    rows.append({"task": task, "kind": "memory", "measure": f"model size{label} (MB)",
                 **{s: m.get("model_mb") for s, m in found.items()}})
    return rows


def _seeds(runs: dict) -> str:
    return ", ".join(str(s) for s in sorted(runs)) or "none"


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def _cells(row: dict, system: str) -> tuple[str, str]:
    """A system's value and its comparison with Wapiti (F1: points and interval; others: ratio)."""
    value = row.get(system)
    if row["kind"] == "f1":
        if not value:
            return "n/a", ""
        text = f"{value['diff']:+.2f} pt [{value['ci95'][0]:+.2f}, {value['ci95'][1]:+.2f}]"
        text += " within noise" if value["within_noise"] else ""
        return f"{value['value']:.2f}", text + f" (seeds {', '.join(map(str, value['seeds']))})"
    base = row.get("wapiti")
    ratio = f"{value / base:.2f}x" if value is not None and base else ""
    return _number(value), ratio


def print_peer_markdown(rows: list[dict]) -> None:
    """The Wapiti table: a second Markdown table after the suite's (ratios: system / Wapiti)."""
    if not rows:
        return
    print()
    print("| corpus | measure | Wapiti | textorch | textorch vs Wapiti | DeLFT | DeLFT vs Wapiti |")
    print("|---|---|---:|---:|---|---:|---|")
    for row in rows:
        w = row.get("wapiti")
        wapiti = "n/a" if w is None else (f"{w:.2f}" if row["kind"] == "f1" else _number(w))
        t, tv = _cells(row, "textorch")
        d, dv = _cells(row, "delft")
        print(f"| {row['task']} | {row['measure']} | {wapiti} | {t} | {tv} | {d} | {dv} |")
