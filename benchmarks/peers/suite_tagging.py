"""The suite's tagging measures, on the models its training kept: speed, memory, cold load,
whole processes, GROBID-sized calls, whole files beside Wapiti.

Each measure here times fresh processes of the compared set-ups taken in turn (rounds), so
that the machine's drift over minutes falls on both systems alike; the rows and ratios made of
them are ``bench_table``'s. Kept apart from training because it runs on saved models alone
(``--grobid-calls`` and ``--whole-files-only`` tag without training anything).
"""

from __future__ import annotations

import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.peers import wapiti_peer
from benchmarks.peers.runner_common import read_blocks, write_calls
from benchmarks.peers.suite_runner import PEERS_DIR, Runner, textorch_cli

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
                cmd = [*textorch_cli(), "seq", "tag", "--model", str(models[system]), "--input", inputs[system],
                       "--input-format", f.format, "--output", str(target), "--batch-size", "32",
                       "--cache-dir", str(r.cache), "--stats-json", str(stats), *r.threads]
            payload, wall = r.run(f"{system}-tagfile-{job['key']}-{i}", cmd, expect_json=system == "delft")
            if payload is not None:
                out[system].setdefault("whole_process_s", []).append(wall)
    return out


def model_dirs(r: Runner, job: dict) -> dict[str, Path]:
    """Where ``train_all`` keeps each system's model of a job's first seed."""
    tag = f"{job['key']}-s{job.get('seeds', [1])[0]}"
    return {"delft": r.work / "models" / "delft" / f"bench-{tag}", "textorch": r.work / "models" / "textorch" / tag}


def _dir_mb(path: Path) -> float:
    """The size of a saved model, every file under its directory, in MiB (the table's model size row)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


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
        if r.textorch_engine == "default" and (models["textorch"] / "onnx").is_dir():
            export_options = None  # training wrote it, with its int8 check: exporting again would drop the check
        if "textorch" in present and export_options is not None:  # making the export is part of making the model
            exported, _ = r.run(f"export-onnx-{task}", [*textorch_cli(), "export", "onnx", "--model",
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
        cmd = [*textorch_cli(), *r.textorch_entry, "seq", "tag", "--model", str(model), "--input",
               inputs["unlabelled"], "--input-format", "grobid", "--output", str(out), "--batch-size", "32",
               *r.engine_options(), "--cache-dir", str(r.cache), *r.threads]
    print(f"tag   {system:8s} {task}: {what} ...", end=" ", flush=True)
    payload, _ = r.run(name, [sys.executable, str(PEERS_DIR / "wapiti_runner.py"), "measure",
                              "--log", str(r.logs / f"{name}.out.log"), "--", *cmd])
    return payload
