"""GROBID-sized tagging calls through DeLFT's ``Sequence`` facade: median ms per call, per engine, per source tree.

The four calls GROBID makes: one date (1 sequence), 30 name strings (name-citation), one header cut
to 400 tokens, one bibliography cut to 2,000 tokens (reference-segmenter), each with all its
feature columns, as ``Sequence(name).load(dir)`` then ``tag(x_all, None, features=f_all)``. Engines:
``torch`` (the facade as it loads today) and ``auto`` (``SequenceLabeler.load(dir, engine="auto")``
given to the facade: ONNX Runtime for small calls, as ``textorch serve`` does by default).

Models: a short training per model into the work dir by each tree's own ``textorch grobid MODEL
train`` (its default architecture, seed 1; pieces of the header and reference-segmenter corpora),
or ``--models DIR`` holding ``date/``, ``name-citation/``, ``header/``, ``reference-segmenter/``.
With ``--baseline-tree DIR`` the same calls run in a process with that tree first on
``PYTHONPATH`` (its own models), rounds of both trees interleaved; the calls' inputs are the same.

    .venv/bin/python -m benchmarks bench_grobid_calls --baseline-tree ../wt-old --output grobid-calls.json
    .venv/bin/python -m benchmarks bench_grobid_calls --quick --engines torch --output /tmp/q.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("TEXTORCH_SHARED_DATA", REPO.parent / "shared" / "data"))

CALLS = {  # call -> (GROBID model, training source, sequences per call, tokens per sequence, epochs)
    "date": ("date", "grobid/date/date-220311.train", 1, 0, 5),
    "names": ("name-citation", "grobid/name-citation/name-citation-251225.train", 30, 0, 3),
    "header": ("header", "grobid/header/header-251202.train.gz", 1, 400, 2),
    "bibliography": ("reference-segmenter", "grobid/reference-segmenter/reference-segmenter-251202.train.gz", 1, 2000, 1),
}
VARIANTS = 8
"""Different inputs per call, taken in turn (GROBID never tags the same date twice in a row)."""
COLUMNS = ["call", "sequences", "tokens", "tree", "engine", "median_ms", "median_cpu_ms", "repeats"]


def read_blocks(path: Path) -> list[list[list[str]]]:
    """A GROBID training file's sequences, each a list of its lines' fields (token, features, label)."""
    opener = gzip.open if path.suffix == ".gz" else open
    blocks, current = [], []
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                current.append(line.split())
            elif current:
                blocks.append(current)
                current = []
    return blocks + ([current] if current else [])


def prepare(work: Path, quick: bool) -> dict:
    """Training files (pieces) and the calls' inputs, written once for every tree."""
    inputs, training = {}, {}
    for call, (model, source, n_sequences, cut, _) in CALLS.items():
        blocks = read_blocks(SHARED_DATA / source)
        train_count = (12 if cut else 60) if quick else (60 if cut else len(blocks))
        pieces = [block[:min(cut, 200) if quick else cut] if cut else block for block in blocks[:train_count]]
        path = work / "data" / f"{model}.train"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join("\n".join(" ".join(f) for f in block) + "\n\n" for block in pieces), encoding="utf-8")
        training[model] = str(path)
        held = blocks[train_count:] if cut else blocks  # long documents: other ones than trained on
        long_enough = [b for b in held if len(b) >= cut] if cut else held
        variants = []
        for v in range(VARIANTS):
            chosen = [long_enough[(v * n_sequences + k) % len(long_enough)] for k in range(n_sequences)]
            chosen = [block[:cut] if cut else block for block in chosen]
            variants.append({"x": [[f[0] for f in b] for b in chosen], "f": [[f[1:-1] for f in b] for b in chosen]})
        inputs[call] = variants
    (work / "inputs.json").write_text(json.dumps(inputs), encoding="utf-8")
    return training


def train_models(tree: Path, training: dict, models: Path, quick: bool) -> None:
    """Each model by ``tree``'s own command line and default architecture (seed 1)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for model, _source, _sequences, _cut, epochs in CALLS.values():
        target = models / model
        if (target / "config.json").is_file():
            continue
        command = [sys.executable, "-P", "-m", "textorch.cli.main", "grobid", model, "train", "--input", training[model],
                   "--max-epoch", str(1 if quick else epochs), "--seed", "1", "--output", str(target),
                   "--cache-dir", str(models.parent / "cache"), "--skip-bad-sequences"]  # GROBID's header has a few
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"training {model} with {tree} failed:\n{done.stderr[-3000:]}")


def worker(args: argparse.Namespace) -> None:
    """One round in this process: every call under every engine, interleaved, ``--repeats`` times;
    prints JSON ``{call/engine: [[ms, cpu_ms], ...]}`` on its last line."""
    import torch

    from textorch.tagging.delft.facade import Sequence
    from textorch.tagging.labeler import SequenceLabeler

    if args.threads:
        torch.set_num_threads(args.threads)
    inputs = json.loads((Path(args.work) / "inputs.json").read_text(encoding="utf-8"))
    facades = {}
    for call in args.calls:
        model = CALLS[call][0]
        for engine in args.engines:
            facade = Sequence(model)
            facade.load(str(Path(args.models) / model))
            if engine != "torch":
                try:
                    facade.labeler = SequenceLabeler.load(Path(args.models) / model, engine=engine)
                except Exception as error:  # noqa: BLE001 - an older tree without that engine: no row
                    print(f"{call}/{engine}: not run ({error})", file=sys.stderr)
                    continue
            facades[f"{call}/{engine}"] = (facade, inputs[call])
    times: dict[str, list[list[float]]] = {key: [] for key in facades}
    for repeat in range(args.warmup + args.repeats):
        for key, (facade, variants) in facades.items():
            variant = variants[repeat % len(variants)]
            started, cpu = time.perf_counter(), time.process_time()
            facade.tag(variant["x"], None, features=variant["f"])
            if repeat >= args.warmup:
                times[key].append([(time.perf_counter() - started) * 1e3, (time.process_time() - cpu) * 1e3])
    import textorch

    print(json.dumps({"textorch": str(Path(textorch.__file__).resolve().parents[1]), **times}))


def run_round(tree: Path, models: Path, args: argparse.Namespace) -> dict:
    # The script by its path with -P (no script or working directory put first on sys.path): the
    # tree's textorch is the one imported, never this checkout's (the worker imports textorch alone).
    command = [sys.executable, "-P", str(Path(__file__).resolve()), "--worker", "--work", str(args.work),
               "--models", str(models), "--repeats", str(args.repeats), "--warmup", str(args.warmup),
               "--calls", *args.calls, "--engines", *args.engines]
    if args.threads:
        command += ["--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"round with {tree} failed:\n{done.stderr[-3000:]}")
    times = json.loads(done.stdout.strip().splitlines()[-1])
    imported = Path(times.pop("textorch"))
    if imported != tree.resolve():
        raise SystemExit(f"a round meant for {tree} imported textorch from {imported}")
    return times


def rows_of(label: str, times: dict, inputs: dict) -> list[dict]:
    rows = []
    for key, pairs in times.items():
        call, engine = key.split("/")
        variant = inputs[call][0]
        rows.append({"call": call, "sequences": len(variant["x"]), "tokens": sum(map(len, variant["x"])), "tree": label,
                     "engine": engine, "median_ms": statistics.median(p[0] for p in pairs),
                     "median_cpu_ms": statistics.median(p[1] for p in pairs), "repeats": len(pairs)})
    return rows


def print_markdown(rows: list[dict]) -> None:
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="folder of the four models (default: trained into the work dir)")
    parser.add_argument("--baseline-tree", help="another source tree, run in its own processes with its own models")
    parser.add_argument("--baseline-models", help="the baseline tree's four models (default: trained by that tree)")
    parser.add_argument("--work", help="work folder (default: a temporary one, removed)")
    parser.add_argument("--calls", nargs="+", default=list(CALLS), choices=list(CALLS))
    parser.add_argument("--engines", nargs="+", default=["torch", "auto"], choices=["torch", "auto", "onnx"])
    parser.add_argument("--rounds", type=int, default=2, help="processes per tree, interleaved")
    parser.add_argument("--repeats", type=int, default=100, help="timed calls of each kind per round")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own, as in GROBID)")
    parser.add_argument("--quick", action="store_true", help="tiny models and few repeats (tests)")
    parser.add_argument("--output", help="write the rows as JSON here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.repeats, args.warmup = 1, 3, 1
    if args.worker:
        worker(args)
        return
    with tempfile.TemporaryDirectory(prefix="grobid-calls-") as scratch:
        args.work = Path(args.work or scratch)
        training = prepare(args.work, args.quick)
        trees = {"this": REPO}
        if args.baseline_tree:
            trees["baseline"] = Path(args.baseline_tree).resolve()
        given = {"this": args.models, "baseline": args.baseline_models}
        models = {}
        for label, tree in trees.items():
            models[label] = Path(given[label]) if given[label] else args.work / "models" / label
            if not given[label]:
                train_models(tree, training, models[label], args.quick)
        times: dict[str, dict[str, list]] = {label: {} for label in trees}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                for key, pairs in run_round(tree, models[label], args).items():
                    times[label].setdefault(key, []).extend(pairs)
        inputs = json.loads((args.work / "inputs.json").read_text(encoding="utf-8"))
    rows = [row for label in trees for row in rows_of(label, times[label], inputs)]
    rows.sort(key=lambda r: (list(CALLS).index(r["call"]), r["engine"], r["tree"]))
    print_markdown(rows)
    if args.output:
        payload = {"command": " ".join(sys.argv), "trees": {k: str(v) for k, v in trees.items()},
                   "load_average": os.getloadavg(), "rows": rows}
        Path(args.output).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
