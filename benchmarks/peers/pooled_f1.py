"""Every system's F1 pooled over seeds, and each pair's paired-bootstrap difference, from results files.

``bench_vs_delft.py --table`` compares textorch with DeLFT within one job and every system with
Wapiti; a new textorch default trained under its own job name is compared with DeLFT's runs of
another job (same task, same seeds' splits) here. Runs are grouped by task and by
``system architecture`` (Wapiti: ``wapiti``); two groups are compared on the seeds both ran,
whose gold labels must be the same (``gold_digest``).

    .venv/bin/python -m benchmarks pooled_f1 results/A.json results/B.json ... [--tag results/B.json=TEXT]
        [--output FILE]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np

from benchmarks.peers import f1_bootstrap


def _label(run: dict, tag: str | None = None) -> str:
    if run["system"] == "wapiti":
        return "wapiti"
    return f"{run['system']} {run['architecture']}" + (f" ({tag})" if tag else "")


def grouped_runs(paths: list[Path], tags: dict[Path, str] | None = None) -> dict[str, dict[str, dict[int, dict]]]:
    """task -> label -> seed -> run; the same run found in two files must be the same run.
    ``tags`` names the textorch and DeLFT runs of some files apart (``textorch ARCH (TAG)``): two
    versions of one default, trained under the same job name, are then two groups."""
    groups: dict[str, dict[str, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for path in paths:
        tag = (tags or {}).get(path)
        for run in json.loads(path.read_text(encoding="utf-8"))["train_runs"]:
            seeds = groups[run["task"]][_label(run, tag)]
            seed = int(run["seed"])
            if seed in seeds and seeds[seed]["test_counts"] != run["test_counts"]:
                raise SystemExit(f"{path}: {run['task']} {_label(run, tag)} seed {seed} differs from an earlier file's")
            seeds[seed] = run
    return groups


def compare(groups: dict[str, dict[str, dict[int, dict]]]) -> dict:
    """Pooled F1 per task and label, and every pair's difference over their common seeds."""
    out: dict = {}
    for task, labels in sorted(groups.items()):
        entry = out[task] = {"pooled": {}, "differences": []}
        for label, seeds in labels.items():
            totals = sum(np.asarray(run["test_counts"]).sum(axis=0) for run in seeds.values())
            entry["pooled"][label] = {"f1": 100 * float(f1_bootstrap.f1(totals)), "seeds": sorted(seeds)}
        for a, b in combinations(sorted(labels), 2):
            common = sorted(set(labels[a]) & set(labels[b]))
            if not common:
                continue
            if any(labels[a][s]["gold_digest"] != labels[b][s]["gold_digest"] for s in common):
                raise SystemExit(f"{task}: {a} and {b} were scored on different test sequences")
            diff = f1_bootstrap.paired_bootstrap([labels[a][s]["test_counts"] for s in common],
                                                 [labels[b][s]["test_counts"] for s in common])
            entry["differences"].append({"a": a, "b": b, "seeds": common, **diff.as_dict()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, help="write the comparison as JSON here")
    parser.add_argument("--tag", action="append", default=[], metavar="FILE=TEXT",
                        help="label FILE's textorch and DeLFT runs 'SYSTEM ARCH (TEXT)', apart from the same job's runs "
                             "in other files (two versions of a default); FILE as given among the results")
    args = parser.parse_args()
    tags = {}
    for item in args.tag:
        file, _, text = item.partition("=")
        if Path(file) not in args.results or not text:
            parser.error(f"--tag {item!r}: give FILE=TEXT with FILE one of the results files")
        tags[Path(file)] = text
    out = compare(grouped_runs(args.results, tags))
    for task, entry in out.items():
        print(f"\n{task}")
        for label, pooled in entry["pooled"].items():
            print(f"  {label:40s} {pooled['f1']:6.2f}  seeds {pooled['seeds']}")
        for d in entry["differences"]:
            print(f"  {d['a']} - {d['b']}: {d['f1_diff']:+.2f} [{d['f1_diff_ci95'][0]:+.2f}, "
                  f"{d['f1_diff_ci95'][1]:+.2f}] (seeds {d['seeds']})")
    if args.output:
        args.output.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
