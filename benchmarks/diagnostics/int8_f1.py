"""The int8 export against the float one: F1 on test splits, and the labels int8 changes.

    .venv/bin/python -m benchmarks int8_f1 --model DIR... --test FILE... --corpus NAME...
        [--input-format grobid] [--output NAME]

Each ``--model`` (a saved tagger) tags its ``--test`` file (labelled) with the ONNX Runtime
tagger twice: from its float export and from its int8 export (``seq tag --engine onnx`` and the
same with ``--quantized``; the int8 files are made here first where the export lacks current
ones). Per model: both F1 scores, and the sequences and tokens whose labels differ. Per corpus
(``--corpus`` names each model's corpus; a corpus's models are its seeds, each with its own
test split): F1 pooled over the seeds, int8 minus float, with the paired-bootstrap 95 %
interval of :mod:`benchmarks.peers.f1_bootstrap`, one scorer for both.

Why: dynamic int8 quantisation moves the emissions a little; whether it moves a label, and F1,
is measured before ``--quantized`` is recommended for tagging (docs/onnx.md).
Writes ``results/NAME.json`` (default ``int8-f1``).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from benchmarks.common import machine, print_table, write_json
from benchmarks.peers.f1_bootstrap import f1, paired_bootstrap, sequence_counts
from textorch.data.readers import read_labelled
from textorch.tagging.onnx_tagger import NotServed, OnnxTagger


def int8_export(model: Path) -> Path | None:
    """Where the model's current int8 export is: None for ``MODEL/onnx`` as it stands, else the
    directory it was just exported to (``MODEL/onnx``, or a temporary one for a read-only model)."""
    try:
        OnnxTagger.open(model, quantized=True, threads=1)
        return None
    except NotServed:
        from textorch.onnx.engine import attach_onnx
        from textorch.tagging.labeler import SequenceLabeler

        return attach_onnx(SequenceLabeler.load(model, engine="torch"), model, quantized=True)


def compare_model(model: Path, test: Path, input_format: str | None) -> dict:
    """Both engines' labels of ``test``: per-sequence entity counts, F1 and what differs."""
    sequences = [s for s in read_labelled(test, input_format).sequences if len(s)]
    gold = [s.labels for s in sequences]
    export = int8_export(model)
    taggers = {quantized: OnnxTagger.open(model, export_dir=export, quantized=quantized, threads=1)
               for quantized in (True, False)}
    int8, fp32 = ([p.labels for p in taggers[q].predict(sequences, with_scores=False)] for q in (True, False))
    counts = {"fp32": sequence_counts(gold, fp32), "int8": sequence_counts(gold, int8)}
    return {
        "model": str(model), "test": str(test), "sequences": len(sequences), "tokens": sum(map(len, sequences)),
        "f1_fp32": 100 * float(f1(counts["fp32"].sum(axis=0))), "f1_int8": 100 * float(f1(counts["int8"].sum(axis=0))),
        "sequences_changed": sum(a != b for a, b in zip(fp32, int8)),
        "tokens_changed": sum(x != y for a, b in zip(fp32, int8) for x, y in zip(a, b)),
        "counts": counts,
    }


def pooled(rows: list[dict]) -> dict:
    """Int8 minus float F1 over one corpus's seeds, with its paired-bootstrap interval."""
    difference = paired_bootstrap([r["counts"]["int8"] for r in rows], [r["counts"]["fp32"] for r in rows])
    return {"seeds": len(rows), "f1_int8": difference.f1_a, "f1_fp32": difference.f1_b, "diff": difference.diff,
            "diff_ci95": [difference.low, difference.high],
            "sequences_changed": sum(r["sequences_changed"] for r in rows), "sequences": sum(r["sequences"] for r in rows),
            "tokens_changed": sum(r["tokens_changed"] for r in rows), "tokens": sum(r["tokens"] for r in rows)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", nargs="+", required=True, type=Path, help="saved tagger directories")
    parser.add_argument("--test", nargs="+", required=True, type=Path, help="each model's labelled test file")
    parser.add_argument("--corpus", nargs="+", required=True, help="each model's corpus (its models are seeds)")
    parser.add_argument("--input-format", choices=["grobid", "conll"], default=None)
    parser.add_argument("--output", default="int8-f1", help="results/NAME.json")
    args = parser.parse_args(argv)
    if not len(args.model) == len(args.test) == len(args.corpus):
        parser.error(f"--model, --test and --corpus need one value each per model "
                     f"({len(args.model)}, {len(args.test)}, {len(args.corpus)} given)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    by_corpus: dict[str, list[dict]] = defaultdict(list)
    for model, test, corpus in zip(args.model, args.test, args.corpus):
        by_corpus[corpus].append(compare_model(model, test, args.input_format))
    table = [{"corpus": corpus, **pooled(rows)} for corpus, rows in by_corpus.items()]
    print_table([{**row, "diff_ci95": "[{:+.2f}, {:+.2f}]".format(*row["diff_ci95"])} for row in table],
                ["corpus", "seeds", "f1_fp32", "f1_int8", "diff", "diff_ci95", "sequences_changed", "sequences",
                 "tokens_changed", "tokens"])
    models = [{k: v for k, v in row.items() if k != "counts"} for rows in by_corpus.values() for row in rows]
    path = write_json(args.output, {"machine": machine(), "args": {k: [str(x) for x in v] if isinstance(v, list) else v
                                                                   for k, v in vars(args).items()},
                                    "corpora": table, "models": models})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
