"""The suite's textorch tagging and training rows on two source trees, side by side.

Issue #29 asks that no row get more than 10 % slower than before the redesign, measured with
the corrected method of issue #31. The two changes landed together, so the before/after ratios
against DeLFT mix them; this script measures the code change alone: this tree's runner
(``textorch_runner.py``, the corrected method) runs the same commands on the same saved models
and files with this tree's textorch and with an older checkout's, one fresh process each,
alternating which goes first, and reports old / new per row (medians over ``--rounds``).

A checkout from before the #29 layout has other module paths: the runner is copied into a
temporary directory with its imports translated (``OLD_PATHS``).

    PYTHONPATH=. .venv/bin/python -m benchmarks code_ab --old OLD_CHECKOUT --rounds 3 \\
        [--train-epochs 1] [--models conll name-header date]

The models are the suite's seed-1 models (``suite_models``; ``python -m benchmarks prepare``
builds them). Writes ``benchmarks/results/code-ab-<old>-<new>.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.suite_models import cache_dir, model_dir, require_models

HERE = Path(__file__).resolve().parent
PEERS = HERE.parent / "peers"  # the suite's runners
SHARED = Path(os.environ.get("TEXTORCH_SHARED", HERE.parents[2] / "shared"))
MODELS = {  # saved seed-1 models both trees can load, their test files and formats
    "conll": (str(model_dir("conll")), SHARED / "data/conll2003/eng.testb", "conll"),
    "name-header": (str(model_dir("name-header")), SHARED / "data/grobid/name-header/name-header-251225.train", "grobid"),
    "date": (str(model_dir("date")), SHARED / "data/grobid/date/date-220311.train", "grobid"),
}
TRAIN = {"conll": (SHARED / "data/conll2003/eng.train", SHARED / "data/conll2003/eng.testa",
                   SHARED / "data/conll2003/eng.testb", "conll")}
OLD_PATHS = {
    "textorch.tagging.config": "textorch.config",
    "textorch.tagging.labeler": "textorch.labeler",
    "textorch.tagging.tag_files": "textorch.workflows",
    "textorch.data.checked_read": "textorch.data.validated",
}
"""Module paths of the runner's imports in a checkout from before the #29 layout."""


def runner_for(tree: Path, work: Path) -> Path:
    """This tree's runner, translated to ``tree``'s module paths where it predates the layout."""
    if (tree / "textorch" / "tagging" / "labeler.py").exists():
        return PEERS / "textorch_runner.py"
    target = work / "runner"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(PEERS / "runner_common.py", target / "runner_common.py")
    text = (PEERS / "textorch_runner.py").read_text(encoding="utf-8")
    for new, old in OLD_PATHS.items():
        text = text.replace(f"from {new} import", f"from {old} import")
    (target / "textorch_runner.py").write_text(text, encoding="utf-8")
    return target / "textorch_runner.py"


def run(tree: Path, runner: Path, args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "MALLOC_MMAP_THRESHOLD_": "33554432",
           "MALLOC_TRIM_THRESHOLD_": "67108864"}  # the suite's allocator settings, for both
    done = subprocess.run([sys.executable, str(runner), *args], capture_output=True, text=True, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_JSON ")]
    if done.returncode or not lines:
        raise SystemExit(f"{tree}: {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("BENCH_JSON "):])


def rates(payload: dict) -> dict[str, float]:
    """Tokens/s per row of a ``tag`` or ``train`` payload."""
    if "tagging" in payload:
        return {row: values["tokens_per_s"] for row, values in payload["tagging"].items()}
    return {"train_epochs": payload["train_tokens_per_s"], "train_whole": payload["whole_tokens_per_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, type=Path, help="the older checkout's root")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--train-epochs", type=int, default=0, help="CoNLL-2003 training rows (0: none)")
    parser.add_argument("--train-precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--embeddings", default=str(SHARED / "embeddings/w2v-conll-grobid-100d.txt"))
    parser.add_argument("--cache-dir", default=str(cache_dir()))
    args = parser.parse_args()
    require_models(args.models)
    new_tree = HERE.parents[1]
    work = Path(tempfile.mkdtemp(prefix="code-ab-"))
    runners = {"new": (new_tree, PEERS / "textorch_runner.py"), "old": (args.old.resolve(), runner_for(args.old, work))}
    common = ["--cache-dir", args.cache_dir, "--threads", "1"]
    jobs = {name: ["tag", "--model", str(MODELS[name][0]), "--input", str(MODELS[name][1]), "--format",
                   MODELS[name][2], "--repeats", "5", "--small-limit", "1000"] for name in args.models}
    if args.train_epochs:
        train, valid, test, fmt = TRAIN["conll"]
        jobs["conll-train"] = ["train", "--task", "conll", "--format", fmt, "--train", str(train), "--valid",
                               str(valid), "--test", str(test), "--embeddings", args.embeddings, "--seed", "1",
                               "--epochs", str(args.train_epochs), "--patience", str(args.train_epochs + 1),
                               "--batch-size", "32", "--precision", args.train_precision]
    measured: dict[str, dict[str, list[dict[str, float]]]] = {job: {"new": [], "old": []} for job in jobs}
    for i in range(args.rounds):
        for job, job_args in jobs.items():
            for side in (("new", "old") if i % 2 == 0 else ("old", "new")):
                tree, runner = runners[side]
                measured[job][side].append(rates(run(tree, runner, [*common, *job_args])))
                print(f"round {i + 1} {job:12} {side}: " + ", ".join(f"{k} {v:,.0f}" for k, v in measured[job][side][-1].items()),
                      flush=True)
    table = []
    for job, sides in measured.items():
        for row in sides["new"][0]:
            ratios = [old[row] / new[row] for old, new in zip(sides["old"], sides["new"])]
            table.append({"job": job, "row": row, "new_tok_s": statistics.median(r[row] for r in sides["new"]),
                          "old_tok_s": statistics.median(r[row] for r in sides["old"]),
                          "old_over_new": statistics.median(ratios), "ratios": ratios})
    print(f"\n{'job':12} {'row':14} {'new tok/s':>10} {'old tok/s':>10} {'old/new':>8}")
    for r in table:
        print(f"{r['job']:12} {r['row']:14} {r['new_tok_s']:10,.0f} {r['old_tok_s']:10,.0f} {r['old_over_new']:8.2f}")

    def commit(tree: Path) -> str:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=tree).stdout.strip()

    old_id, new_id = commit(runners["old"][0]), commit(new_tree)
    output = HERE.parent / "results" / f"code-ab-{old_id}-{new_id}.json"
    output.write_text(json.dumps({"old": old_id, "new": new_id, "rounds": args.rounds, "load": os.getloadavg(),
                                  "command": " ".join(sys.argv), "rows": table}, indent=1) + "\n")
    print(f"wrote {output}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
