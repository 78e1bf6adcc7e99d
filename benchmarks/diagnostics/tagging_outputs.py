"""Labels and scores of saved models on test files, dumped exactly, and two dumps compared.

A restructuring that keeps a route must keep its outputs bit for bit. Run ``dump`` once with the
old code on ``PYTHONPATH`` and once with the new, on the same saved models, then ``compare``:

    PYTHONPATH=OLD python -m benchmarks tagging_outputs dump before.json --job conll=MODEL:eng.testb ...
    PYTHONPATH=NEW python -m benchmarks tagging_outputs dump after.json  --job conll=MODEL:eng.testb ...
    python -m benchmarks tagging_outputs compare before.json after.json --json summary.json

Each job is tagged at batch 32, at batch 256 and as one-sequence calls (the first
``--one-sequence`` sequences), so every CPU route of a BiLSTM-CRF call is covered. Scores are
kept as the hex of their float32 bits: equal means identical, not close.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path


def _float_bits(values: list[float]) -> list[str]:
    return [struct.pack("<f", v).hex() for v in values]


def dump(jobs: dict[str, tuple[str, str]], one_sequence: int) -> dict[str, list]:
    """``{job/route: [[labels, score bits], ...]}`` for each job's test file."""
    from textorch.data.readers import read_labelled
    from textorch.tagging.labeler import SequenceLabeler

    outputs: dict[str, list] = {}
    for name, (model_dir, test_file) in jobs.items():
        labeler = SequenceLabeler.load(model_dir, engine="torch")
        sequences = list(read_labelled(test_file).sequences)
        routes = {"batch32": labeler.predict(sequences, batch_size=32),
                  "batch256": labeler.predict(sequences, batch_size=256),
                  "one": [labeler.predict([s])[0] for s in sequences[:one_sequence]]}
        for route, predictions in routes.items():
            outputs[f"{name}/{route}"] = [[p.labels, _float_bits(p.scores)] for p in predictions]
        print(f"{name}: {len(sequences)} sequences", file=sys.stderr)
    return outputs


def compare(before: dict[str, list], after: dict[str, list]) -> list[dict]:
    """One row per job/route: sequences, tokens, and how many sequences differ in labels or scores."""
    rows = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key, []), after.get(key, [])
        rows.append({
            "route": key, "sequences": len(old), "tokens": sum(len(labels) for labels, _ in old),
            "same_length": len(old) == len(new),
            "label_differences": sum(a[0] != b[0] for a, b in zip(old, new)),
            "score_differences": sum(a[1] != b[1] for a, b in zip(old, new)),
            "identical": old == new,
        })
    return rows


def _job(spec: str) -> tuple[str, tuple[str, str]]:
    name, _, rest = spec.partition("=")
    model_dir, _, test_file = rest.partition(":")
    if not (name and model_dir and test_file):
        raise argparse.ArgumentTypeError(f"--job wants NAME=MODEL_DIR:TEST_FILE, got {spec!r}")
    return name, (model_dir, test_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    dumping = commands.add_parser("dump")
    dumping.add_argument("output")
    dumping.add_argument("--job", action="append", type=_job, required=True, metavar="NAME=MODEL_DIR:TEST_FILE")
    dumping.add_argument("--one-sequence", type=int, default=300, help="sequences tagged one call each")
    comparing = commands.add_parser("compare")
    comparing.add_argument("before")
    comparing.add_argument("after")
    comparing.add_argument("--json", help="write the table here too")
    args = parser.parse_args(argv)
    if args.command == "dump":
        Path(args.output).write_text(json.dumps(dump(dict(args.job), args.one_sequence)))
        return 0
    rows = compare(json.loads(Path(args.before).read_text()), json.loads(Path(args.after).read_text()))
    print(f"{'route':24s} {'sequences':>9s} {'tokens':>7s} {'labels differ':>13s} {'scores differ':>13s}  identical")
    for row in rows:
        print(f"{row['route']:24s} {row['sequences']:9d} {row['tokens']:7d} {row['label_differences']:13d} "
              f"{row['score_differences']:13d}  {row['identical']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(row["identical"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
