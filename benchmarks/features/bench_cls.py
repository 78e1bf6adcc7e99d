"""Text classification on the shared corpora: fixed stratified split and seed, per-class F1.

Usage (from the repository root):
    .venv/bin/python -m benchmarks bench_cls citations                       # gru, 10 epochs, 80/20
    .venv/bin/python -m benchmarks bench_cls licenses copyrights --seeds 1 2 3
    .venv/bin/python -m benchmarks bench_cls citations --architecture cnn --fold-count 5

Each run: the corpus is split 80/20 (stratified by class, seeded); 10 % of the 80 % is held out
for validation unless --fold-count > 1; all --max-epoch epochs run (unless --patience is given)
and the weights of the best validation macro-F1 epoch are kept; the model is scored on the 20 %. Word vectors: ../shared/embeddings/w2v-conll-grobid-100d.txt (the LMDB cache
is built before timing). Tasks: ``citations`` (Athar's citation sentiment, 3 classes),
``licenses`` (licence of a statement, 9 classes present), ``copyrights`` (copyright owner, 3).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from benchmarks.common import machine, mean_sd, peak_rss_mb, print_table, shared, write_json  # noqa: E402

from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier  # noqa: E402
from textorch.tagging.config import TrainConfig  # noqa: E402
from textorch.data.cls_readers import read_cls  # noqa: E402
from textorch.data.splits import stratified_holdout  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402

TASKS = {
    # file, format, label columns, tokens read per text (DeLFT's citation classifier reads 150)
    "citations": ("classification/citations/citation_sentiment_corpus.txt", "citation-sentiment", (), 150),
    "licenses": ("classification/licenses/copyrights-licenses-data-validated.csv", "licenses", ("license",), 300),
    "copyrights": ("classification/licenses/copyrights-licenses-data-validated.csv", "licenses", ("copyright_owner",), 300),
}


def run(task: str, seed: int, args: argparse.Namespace, embeddings: object, vectors: Path) -> dict:
    relative, fmt, label_columns, max_length = TASKS[task]
    corpus = read_cls(shared("data", relative), fmt, label_columns=label_columns)
    train, test = stratified_holdout(corpus, args.test_fraction, seed, "held out as test")
    valid = None
    if args.fold_count == 1:
        train, valid = stratified_holdout(train, 0.1, seed + 1, "held out for validation")
    model_config = ClsModelConfig(architecture=args.architecture, fold_count=args.fold_count, hidden=args.hidden,
                                  max_length=args.max_length or max_length)
    data_config = ClsDataConfig(format=fmt, label_columns=label_columns, embeddings=str(vectors), class_weights=args.class_weights)
    train_config = TrainConfig(seed=seed, max_epoch=args.max_epoch, batch_size=args.batch_size, patience=args.patience or args.max_epoch)
    started = time.perf_counter()
    classifier = TextClassifier.build(train, model_config, data_config, embeddings, seed=seed)
    reports = classifier.fit(train, valid, train_config)
    train_s = time.perf_counter() - started
    scores = classifier.evaluate(test)
    row = {
        "task": task,
        "architecture": args.architecture,
        "seed": seed,
        "train/valid/test": f"{len(train)}/{len(valid) if valid else 0}/{len(test)}",
        "max_length": model_config.max_length,
        "epochs": "+".join(str(len(r.training.history)) for r in reports),
        "best": "+".join(str(r.training.best_epoch) for r in reports),
        "accuracy": scores["accuracy"],
        "macro_f1": scores["macro"]["f1"],
        "train_s": train_s,
        "peak_rss_mb": peak_rss_mb(),
    }
    for name, values in scores["per_class"].items():
        row[f"f1:{name}"] = values["f1"]
    row["scores"] = scores
    row["history"] = [[{"epoch": e.epoch, "loss": e.loss, "valid": e.valid_score} for e in r.training.history] for r in reports]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", choices=list(TASKS))
    parser.add_argument("--architecture", default="gru")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--max-epoch", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--patience", type=int, default=None, help="default: --max-epoch (all epochs run, best kept)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--fold-count", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=None, help="tokens read per text (default: 150 for citations, 300 otherwise)")
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--class-weights", default=None, help="default: balanced")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--name", default=None, help="results file name (default: cls-TASKS-ARCH)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    vectors = shared("embeddings", "w2v-conll-grobid-100d.txt")
    embeddings = open_embeddings(str(vectors), cache_dir=args.cache_dir)  # cache built here, before timing
    rows = [run(task, seed, args, embeddings, vectors) for task in args.tasks for seed in args.seeds]
    for task in args.tasks:
        task_rows = [r for r in rows if r["task"] == task]
        classes = [k for k in task_rows[0] if k.startswith("f1:")]
        print_table(task_rows, ["task", "architecture", "seed", "train/valid/test", "epochs", "best", "accuracy", "macro_f1", *classes, "train_s"])
        mean, sd = mean_sd([r["macro_f1"] for r in task_rows])
        print(f"{task}: macro-F1 {mean:.4f} +- {sd:.4f} over seeds {args.seeds}\n")
    name = args.name or f"cls-{'-'.join(args.tasks)}-{args.architecture}" + (f"-{args.fold_count}fold" if args.fold_count > 1 else "")
    path = write_json(name, {"machine": machine(), "runs": rows, "command": " ".join(sys.argv)})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
