"""The one table of bench_vs_delft.py: absolute numbers, textorch / DeLFT ratios, the project's targets.

A ratio is always textorch divided by DeLFT: above 1 is better for throughputs, below 1 is
better for times, memory and sizes. F1 is compared as a difference in points instead.
"""

from __future__ import annotations

import statistics

from benchmarks.peers import f1_bootstrap

TAGGING = [("batch1", "tag tok/s, batch 1, new tokens"), ("batch32", "tag tok/s, batch 32, new tokens"),
           ("batch256", "tag tok/s, batch 256, new tokens"), ("stream", "tag tok/s, one-sequence calls, new tokens"),
           ("stream_seen", "tag tok/s, one-sequence calls, tokens seen before")]
"""Each tagging measure and its row. "new tokens": every pass starts from a system state that
has met no token (runner_common.tagging_rows); "tokens seen before": textorch's memory of
the tokens kept from the passes before."""
FIRST_METHOD_LABELS = {"batch1": "tag tok/s, batch 1", "batch32": "tag tok/s, batch 32",
                       "batch256": "tag tok/s, batch 256", "stream": "tag tok/s, one-sequence calls"}
"""The rows' names in results files of the first method (no ``method`` field), whose textorch
passes kept the word table, the embeddings memo and the character ids across passes."""
PEER_METRIC = {"stream_seen": "stream"}
"""DeLFT keeps nothing across calls: its stream is the same whatever it saw before."""
VARIANTS = [("textorch_labels", ", labels only (DeLFT's output)"), ("textorch_onnx", " (ONNX engine)"),
            ("textorch_auto", " (auto engine: the server's default)"),
            ("textorch_onnx_int8", " (ONNX engine, int8)"), ("textorch_bf16", " (bf16)"),
            ("textorch_bf16_labels", ", labels only (DeLFT's output), bf16")]
"""textorch's other tagging set-ups (bench_vs_delft's result keys), each compared with DeLFT's one."""
F1_CHANGE = [("textorch_onnx_int8", "int8 (ONNX)"), ("textorch_bf16", "bf16")]
"""Set-ups that change the numbers, with the F1 of their predictions against textorch's fp32 one."""
GROBID_CALLS = [("grobid_calls", "new tokens"), ("grobid_calls_seen", "tokens seen before")]
"""The "GROBID-sized calls through the DeLFT interface" rows (runners' ``calls``): textorch's
facade against DeLFT's ``Sequence``, each a whole call (``load_data_crf_string`` + ``tag``);
DeLFT keeps nothing across calls, so both rows compare with its one measure."""
FACADE_COST = [("grobid_calls", "grobid_calls_predict", "new tokens"),
               ("grobid_calls_seen", "grobid_calls_predict_seen", "tokens seen before")]
"""textorch's facade call against its plain ``SequenceLabeler.predict`` on the same calls'
sequences, measured in the same process: what the facade costs, not a comparison with DeLFT."""
F1_TOLERANCE = 0.003  # the target: not below DeLFT's by more than 0.3 points


def ratio_target(job: dict, metric: str) -> float | None:
    """The project's ratio target (textorch / DeLFT) for a metric of a job, None where it sets none."""
    bert = job["architecture"].startswith("BERT")
    if metric == "train" and job["task"] == "conll" and not bert:
        return 3.0
    if metric in ("batch32", "batch256"):
        return 2.0 if bert else 5.0
    if metric in ("stream", "grobid_calls") and not bert:
        return 3.0
    return None


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def paired_ratios(ours: dict, peer: dict) -> list[float] | None:
    """textorch / DeLFT round by round, when both were timed in the same rounds
    (``suite_tagging.measure_tagging``): each ratio compares processes that ran a minute
    apart, so the machine's drift over a run cancels out of it."""
    a, b = ours.get("rounds_tokens_per_s"), peer.get("rounds_tokens_per_s")
    if not a or not b or len(a) != len(b) or len(a) < 2 or not all(b):
        return None
    return [x / y for x, y in zip(a, b)]


def _rate_row(job: dict, metric: str, label: str, ours: dict, peer: dict) -> dict:
    """A tagging throughput, paired by round where both were timed in rounds."""
    return _paired_row(job, metric, label, ours.get("tokens_per_s"), peer.get("tokens_per_s"), paired_ratios(ours, peer))


def _training_row(job: dict, metric: str, label: str, runs: dict[str, list[dict]], ours: str, field: str) -> dict:
    """A training throughput: medians over the seeds, paired by seed where both systems trained
    the same seeds (``suite_training.train_all`` runs DeLFT and textorch back to back for each
    seed: a seed is a round)."""
    mine, peer = runs.get(ours, []), runs.get("delft", [])
    by_seed = [{r.get("seed"): r.get(field) for r in side} for side in (mine, peer)]
    seeds = sorted(set(by_seed[0]) & set(by_seed[1]) - {None})
    pairs = None
    if len(seeds) >= 2 and len(seeds) == len(mine) == len(peer) and all(by_seed[0].values()) and all(by_seed[1].values()):
        pairs = [by_seed[0][seed] / by_seed[1][seed] for seed in seeds]
    return _paired_row(job, metric, label, _median([r.get(field) for r in mine]), _median([r.get(field) for r in peer]), pairs)


def _paired_row(job: dict, metric: str, label: str, t: float | None, d: float | None, pairs: list[float] | None) -> dict:
    """A throughput row whose ratio is the median of the paired ratios (kept in
    ``ratio_rounds``), or, without pairs, the ratio of the two medians ``t`` and ``d``."""
    row = _row(job, metric, label, t, d, True, ratio=None if pairs is None else statistics.median(pairs))
    if pairs is not None:
        row["ratio_rounds"] = pairs
    return row


def _row(job: dict, metric: str, label: str, t: float | None, d: float | None, higher: bool,
         ratio: float | None = None) -> dict:
    if ratio is None:
        ratio = t / d if t is not None and d else None
    target = ratio_target(job, metric)
    if not higher and metric in ("peak_rss", "load"):
        target = 1.0
    met = None
    if ratio is not None and target is not None:
        met = ratio >= target if higher else ratio <= target
    return {"job": job["key"], "metric": label, "textorch": t, "delft": d, "ratio": ratio,
            "target": None if target is None else (f">= {target:g}x" if higher else f"<= {target:g}x"), "met": met}


def _f1_row(job: dict, runs: dict, ours: str = "textorch", suffix: str = "") -> dict:
    """textorch's F1 against DeLFT's: from both systems' per-sequence entity counts pooled over
    the seeds both trained, with the paired bootstrap's 95 % interval (``f1_bootstrap``);
    without counts (results of the first method), the mean of the libraries' own F1s."""
    row = {"job": job["key"], "ratio": None, "target": ">= -0.3 pt", "setting": job.get("setting", "") + suffix}
    mine = {r.get("seed"): r for r in runs.get(ours, []) if r.get("test_counts")}
    peer = {r.get("seed"): r for r in runs.get("delft", []) if r.get("test_counts")}
    seeds = sorted(set(mine) & set(peer) - {None})
    unpaired = [seed for seed in seeds if mine[seed].get("gold_digest") != peer[seed].get("gold_digest")]
    if seeds and not unpaired:
        compared = f1_bootstrap.paired_bootstrap([mine[seed]["test_counts"] for seed in seeds],
                                                 [peer[seed]["test_counts"] for seed in seeds])
        return {**row, "metric": f"test F1, {len(seeds)} seed(s) pooled{suffix}", "textorch": compared.f1_a / 100,
                "delft": compared.f1_b / 100, "diff_points": compared.diff,
                "ci95_points": [compared.low, compared.high], "within_noise": compared.within_noise,
                "seeds": seeds, "met": compared.diff >= -100 * F1_TOLERANCE}
    f1 = {s: [r["f1"] for r in runs.get(s, [])] for s in (ours, "delft")}
    t = statistics.fmean(f1[ours]) if f1[ours] else None
    d = statistics.fmean(f1["delft"]) if f1["delft"] else None
    diff = t - d if t is not None and d is not None else None
    n = min((len(v) for v in f1.values() if v), default=0)  # one system alone (--systems): its seeds
    note = f", not paired: test sets differ for seed(s) {unpaired}" if unpaired else ""
    return {**row, "metric": f"test F1, mean of {n} seed(s){suffix}{note}", "textorch": t, "delft": d,
            "diff_points": None if diff is None else 100 * diff, "met": None if diff is None else diff >= -F1_TOLERANCE}


def _mean_row(job: dict, label: str, runs: dict, field: str) -> dict:
    """A quantity of each system's training runs, averaged over seeds, with no ratio (epochs run)."""
    values = {s: [r[field] for r in runs.get(s, []) if r.get(field) is not None] for s in ("textorch", "delft")}
    means = {s: statistics.fmean(v) if v else None for s, v in values.items()}
    return {"job": job["key"], "metric": label, "textorch": means["textorch"], "delft": means["delft"],
            "ratio": None, "no_ratio": True, "target": None, "met": None}


def build_rows(jobs: list[dict], train_runs: list[dict], tagging: list[dict]) -> list[dict]:
    rows: list[dict] = []
    by_job = {t["key"]: t for t in tagging}
    for job in jobs:
        runs: dict[str, list[dict]] = {}
        for run in train_runs:
            if run["key"] == job["key"]:
                runs.setdefault(run["system"], []).append(run)
        rows.append(_training_row(job, "train", "train tok/s, epochs only (training batches)", runs, "textorch",
                                  "train_tokens_per_s"))
        rows.append(_training_row(job, "whole_train", "train tok/s, whole training call", runs, "textorch",
                                  "whole_tokens_per_s"))
        rows.append(_f1_row(job, runs))
        if job.get("app"):  # trained to each system's own early stopping: how long, how many epochs
            rows.append(_row(job, "whole_train_s", "whole training call (s)", _median([r.get("whole_s") for r in runs.get("textorch", [])]),
                             _median([r.get("whole_s") for r in runs.get("delft", [])]), False))
            rows.append(_mean_row(job, "epochs run, mean over seeds", runs, "epochs"))
            continue  # no models kept, nothing tagged
        if runs.get("textorch_bf16"):  # textorch trained once more under bf16 autocast
            rows.append(_training_row(job, "train", "train tok/s, epochs only (training batches), bf16 training", runs,
                                      "textorch_bf16", "train_tokens_per_s"))
            rows.append(_f1_row(job, runs, "textorch_bf16", ", bf16 training"))
        tag = by_job.get(job["key"], {})
        t_tag, d_tag = tag.get("textorch") or {}, tag.get("delft") or {}
        for metric, label in TAGGING:
            ours = t_tag.get("tagging", {}).get(metric, {})
            if ours.get("tokens_per_s") is None and metric in PEER_METRIC:
                continue
            peer = d_tag.get("tagging", {}).get(PEER_METRIC.get(metric, metric), {})
            rows.append(_rate_row(job, metric, label, ours, peer))
        for variant, suffix in VARIANTS:
            other = tag.get(variant) or {}
            for metric, label in TAGGING:
                if metric in PEER_METRIC:  # one stream per variant: its caches emptied before each pass
                    continue
                ours = other.get("tagging", {}).get(metric, {})
                if ours.get("tokens_per_s") is not None:
                    rows.append(_rate_row(job, metric, label + suffix, ours, d_tag.get("tagging", {}).get(metric, {})))
        for variant, setup in F1_CHANGE:
            changed = (tag.get(variant) or {}).get("f1")
            if changed is not None and t_tag.get("f1") is not None:
                # Not a comparison with DeLFT: textorch's seed-1 model against itself in fp32.
                rows.append({"job": job["key"],
                             "metric": f"test F1 tagged in {setup} (fp32: {100 * t_tag['f1']:.2f}), change",
                             "textorch": changed, "delft": None, "ratio": None,
                             "diff_points": 100 * (changed - t_tag["f1"]), "target": None, "met": None})
        rows.extend(grobid_call_rows(job, tag))
        rows.append(_row(job, "whole", "tag a file, whole process (s)", _median(t_tag.get("whole_process_s", [])),
                         _median(d_tag.get("whole_process_s", [])), False))
        rows.append(_row(job, "peak_rss", "peak RSS while tagging (MB)", t_tag.get("peak_rss_mb"),
                         d_tag.get("peak_rss_mb"), False))
        # Cold start = library import + model load in a fresh process: where a library does its
        # heavy imports (at import or lazily inside load) moves time between the two parts.
        cold = lambda side, f: _median([sum(c[k] for k in f) for c in side.get("cold", [])])  # noqa: E731
        rows.append(_row(job, "load", "cold start: import + model load (s)", cold(t_tag, ("import_s", "load_s")),
                         cold(d_tag, ("import_s", "load_s")), False))
        rows.append(_row(job, "load_only", "  of which model load (s)", cold(t_tag, ("load_s",)),
                         cold(d_tag, ("load_s",)), False))
        rows.append(_row(job, "size", "model directory (MB)", t_tag.get("model_dir_mb"), d_tag.get("model_dir_mb"), False))
    return rows


def grobid_call_rows(job: dict, tag: dict) -> list[dict]:
    """The "GROBID-sized calls" rows of a job's tagging results (``textorch_calls`` and
    ``delft_calls`` of ``suite_tagging.measure_grobid_calls``); none when they were not run.

    Then the facade's cost: its whole call against ``predict`` alone, per round of the same
    process (a ratio below 1 is what the facade takes: reading the text, the sequences, the
    ``[token, label]`` pairs).
    """
    ours, peer = tag.get("textorch_calls") or {}, tag.get("delft_calls") or {}
    found = ours.get("tagging", {})
    if not found and not peer:
        return []
    per_call = ours.get("per_call") or peer.get("per_call")
    label = f"GROBID-sized calls through the DeLFT interface ({per_call} sequences a call), tok/s"
    rows = []
    for metric, state in GROBID_CALLS:
        rows.append(_rate_row(job, metric, f"{label}, {state}", found.get(metric, {}),
                              peer.get("tagging", {}).get("grobid_calls", {})))
    for facade, plain, state in FACADE_COST:
        a, b = found.get(facade, {}), found.get(plain, {})
        if a.get("tokens_per_s") and b.get("tokens_per_s"):
            pairs = [x / y for x, y in zip(a.get("rounds_tokens_per_s", []), b.get("rounds_tokens_per_s", [])) if y]
            ratio = statistics.median(pairs) if pairs else a["tokens_per_s"] / b["tokens_per_s"]
            row = {"job": job["key"], "metric": f"  facade's whole call / textorch's predict alone, same calls, {state} "
                   "(DeLFT column: predict tok/s)", "textorch": a["tokens_per_s"], "delft": b["tokens_per_s"],
                   "ratio": ratio, "target": None, "met": None}
            if len(pairs) >= 2:
                row["ratio_rounds"] = pairs
            rows.append(row)
    return rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


def print_markdown(rows: list[dict]) -> None:
    """One Markdown table (readable in a terminal, pasted as is into benchmarks/README.md)."""
    print("| model | measure | textorch | DeLFT | textorch / DeLFT | target | met |")
    print("|---|---|---:|---:|---:|---|---|")
    for row in rows:
        if "diff_points" in row:
            t = "n/a" if row["textorch"] is None else f"{100 * row['textorch']:.2f}"
            d = "n/a" if row["delft"] is None else f"{100 * row['delft']:.2f}"
            ratio = "n/a" if row["diff_points"] is None else f"{row['diff_points']:+.2f} pt"
            if row.get("ci95_points"):
                low, high = row["ci95_points"]
                ratio += f" [{low:+.2f}, {high:+.2f}]" + (" within noise" if row["within_noise"] else "")
        elif row.get("no_ratio"):
            t, d, ratio = _fmt(row["textorch"]), _fmt(row["delft"]), ""
        else:
            t, d = _fmt(row["textorch"]), _fmt(row["delft"])
            ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}x"
            if row.get("ratio_rounds"):  # the paired rounds' spread
                ratio += f" ({min(row['ratio_rounds']):.2f}-{max(row['ratio_rounds']):.2f})"
        met = {True: "yes", False: "**no**", None: ""}[row["met"]]
        print(f"| {row['job']} | {row['metric']} | {t} | {d} | {ratio} | {row['target'] or ''} | {met} |")
