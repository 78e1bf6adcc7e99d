"""The suite's results files read back: their tables reprinted, runs of one mode pooled.

``--table`` rebuilds the tables of earlier results files without running anything, so that a
change to the table's layout, or runs made separately (one seed or one system each), can be
shown as one table; the F1 comparisons written into every results file are made here too, the
same way for a fresh run and for a pooled one.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.peers import wapiti_peer
from benchmarks.peers.bench_table import build_rows, grobid_call_rows, print_markdown


def f1_comparisons(rows: list[dict]) -> list[dict]:
    """The F1 differences of a run, one per task and setting, with their bootstrap interval
    (``f1_diff``, ``f1_diff_ci95``: textorch minus DeLFT, in points)."""
    return [{"job": row["job"], "setting": row["setting"], "f1_diff": row["diff_points"],
             "f1_diff_ci95": row.get("ci95_points"), "within_noise": row.get("within_noise"),
             "seeds": row.get("seeds")} for row in rows if row.get("setting") and "diff_points" in row]


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
    than today's rows of the same place (see ``bench_vs_delft.METHOD_VERSION``)."""
    payloads = [read_results(path) for path in paths]
    if len(payloads) > 1 or output:
        payload = pooled(payloads, identical_once)
        if output:
            output.write_text(json.dumps({**payload, "pooled_from": [p.name for p in paths]}, indent=2) + "\n",
                              encoding="utf-8")
        print_tables(payload["rows"], payload["peers"])
        return 0
    payload = payloads[0]
    if "grobid-calls" in payload.get("mode", ""):
        print_markdown([row for tag in payload["tagging"] for row in grobid_call_rows({"key": tag["key"]}, tag)])
        return 0
    if payload.get("method") is None:
        print(f"{paths[0]}: measured with the first method (before the method's fixes); its rows as written:")
        print_markdown(payload["rows"])
        return 0
    print_tables(build_rows(jobs_of(payload, payload["train_runs"]), payload["train_runs"], payload["tagging"]),
                  wapiti_peer.peer_rows(payload["train_runs"], payload["tagging"]))
    return 0


def print_tables(rows: list[dict], peers: list[dict]) -> None:
    """The suite's table (when a system of it ran), then Wapiti's (when Wapiti ran)."""
    if rows or not peers:
        print_markdown(rows)
    wapiti_peer.print_peer_markdown(peers)
