"""Train BidLSTM_CRF on CoNLL-2003 or a GROBID corpus; print F1, time, tokens/s, peak memory.

Usage (from the repository root):
    .venv/bin/python -m benchmarks bench_seq_train conll --max-epoch 3 --seeds 1
    .venv/bin/python -m benchmarks bench_seq_train date --seeds 1 2 3
    .venv/bin/python -m benchmarks bench_seq_train name-header --architecture BidLSTM_CRF_FEATURES

The shared data and embeddings are found in ../shared (or TEXTORCH_SHARED_DATA /
TEXTORCH_SHARED_EMBEDDINGS). The embeddings cache is built before timing starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from benchmarks.common import machine, mean_sd, print_table, shared, train_on_task, training_row, write_json  # noqa: E402

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402

GROBID = {
    "date": "grobid/date/date-220311.train",
    "name-header": "grobid/name-header/name-header-251225.train",
    "name-citation": "grobid/name-citation/name-citation-251225.train",
    "affiliation-address": "grobid/affiliation-address/affiliation-address-251225.train",
}


def run(task: str, seed: int, args: argparse.Namespace, vectors: Path) -> dict:
    train_config = TrainConfig(seed=seed, max_epoch=args.max_epoch, batch_size=args.batch_size,
                               early_stop=args.early_stop, patience=args.patience)
    data_config = DataConfig(embeddings=str(vectors))
    model_config = ModelConfig(architecture=args.architecture)
    outcome, wall_s = train_on_task(task, GROBID, model_config, train_config, data_config, cache_dir=args.cache_dir)
    return training_row(task, args.architecture, seed, outcome, wall_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=["conll", *GROBID])
    parser.add_argument("--architecture", default="BidLSTM_CRF")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--max-epoch", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--patience", type=int, default=5)
    parser.add_argument("--early-stop", type=lambda v: v.lower() == "true", default=True)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--name", default=None, help="results file name (default: train-TASK-ARCH)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    vectors = shared("embeddings", "w2v-conll-grobid-100d.txt")
    open_embeddings(str(vectors), cache_dir=args.cache_dir).close()  # warm the cache before timing
    rows = [run(args.task, seed, args, vectors) for seed in args.seeds]
    f1_mean, f1_sd = mean_sd([r["f1"] for r in rows])
    print_table(rows, ["task", "architecture", "seed", "epochs", "best_epoch", "f1", "s_per_epoch", "train_tokens_per_s", "peak_rss_mb"])
    print(f"mean F1 {f1_mean:.4f} +- {f1_sd:.4f} over seeds {args.seeds}")
    name = args.name or f"train-{args.task}-{args.architecture}"
    path = write_json(name, {"machine": machine(), "runs": rows, "f1_mean": f1_mean, "f1_sd": f1_sd, "command": " ".join(sys.argv)})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
