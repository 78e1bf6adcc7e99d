"""Data-parallel throughput: training and tagging tokens/s per device count, precision and batch size.

Meant for a machine with one or more GPUs; runs the real commands (``textorch seq train`` /
``seq tag`` with ``--devices N``) on a synthetic corpus, so launcher, DDP, sharded validation
and gathering are all in the measurement. Training speed is the second epoch's (the first
includes warm-up); tagging speed is from ``--stats-json``.

Usage (from the repository root):
    .venv/bin/python -m benchmarks bench_gpu                       # all GPUs, about 4 minutes
    .venv/bin/python -m benchmarks bench_gpu --devices 1 2 4 8 --batch-sizes 32 256
    .venv/bin/python -m benchmarks bench_gpu --device cpu --quick  # check the script on a CPU

Without a GPU, ``--device cpu`` measures CPU processes instead (gloo); those numbers say
nothing about GPUs.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, machine, print_table, write_json  # noqa: E402

import torch  # noqa: E402

WORDS = ["alpha", "beta", "gamma", "delta", "Paris", "Berlin", "John", "Mary", "in", "the", "of", "lives", "2005", ","]
EPOCH_LINE = re.compile(r"epoch 2/2 .* ([0-9.]+) tok/s")


def write_corpus(path: Path, n_sentences: int, seed: int = 0) -> int:
    """A CoNLL file of random sentences (8 to 40 tokens) with PER/LOC spans; returns tokens."""
    rng = random.Random(seed)
    lines, tokens = [], 0
    for _ in range(n_sentences):
        for _ in range(rng.randint(8, 40)):
            word = rng.choice(WORDS)
            tag = "I-PER" if word in ("John", "Mary") else "I-LOC" if word in ("Paris", "Berlin") else "O"
            lines.append(f"{word} {tag}")
            tokens += 1
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tokens


def textorch(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "textorch.cli.main", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if result.returncode != 0:
        raise SystemExit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr[-3000:]}")
    return result


def write_random_encoder(directory: Path, size: str) -> Path:
    """A randomly initialised BERT of a real model's shape: speed does not depend on the weights,
    so GPU throughput is measured without shipping a checkpoint to the GPU machine."""
    from transformers import BertConfig, BertModel, BertTokenizer

    hidden, layers, heads = {"minilm": (384, 6, 12), "base": (768, 12, 12)}[size]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(WORDS))]
    config = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * hidden, max_position_embeddings=512)
    BertModel(config).save_pretrained(directory)
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=False).save_pretrained(directory)
    return directory


def train_run(data: Path, model: Path, devices: int, precision: str, batch: int, opts: argparse.Namespace,
              architecture: str, extra: list[str]) -> dict:
    args = ["seq", "train", "--train", str(data), "--output", str(model), "--max-epoch", "2", "--early-stop", "false",
            "--batch-size", str(batch), "--devices", str(devices), "--device", opts.device, "--precision", precision,
            "--architecture", architecture, *extra]
    started = time.perf_counter()
    result = textorch(args, opts.timeout)
    match = EPOCH_LINE.search(result.stderr)
    return {"architecture": architecture, "task": "train", "devices": devices, "precision": precision, "batch": batch,
            "tokens_per_s": float(match.group(1)) if match else None, "wall_s": round(time.perf_counter() - started, 1)}


def tag_run(data: Path, model: Path, devices: int, batch: int, opts: argparse.Namespace, work: Path,
            architecture: str) -> dict:
    stats = work / f"tag-{devices}.json"
    args = ["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", "conll", "--output",
            str(work / "tagged.conll"), "--batch-size", str(batch), "--devices", str(devices), "--device", opts.device,
            "--stats-json", str(stats)]
    started = time.perf_counter()
    textorch(args, opts.timeout)
    return {"architecture": architecture, "task": "tag", "devices": devices, "precision": "fp32", "batch": batch,
            "tokens_per_s": json.loads(stats.read_text())["tokens_per_s"], "wall_s": round(time.perf_counter() - started, 1)}


def device_counts(opts: argparse.Namespace) -> list[int]:
    if opts.devices:
        return opts.devices
    available = torch.cuda.device_count() if opts.device == "cuda" else 2
    counts, n = [], 1
    while n <= available:
        counts.append(n)
        n *= 2
    return counts if counts[-1] == available else counts + [available]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    parser.add_argument("--devices", type=int, nargs="*", default=None, help="device counts (default: 1, 2, 4, ... up to all)")
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[32, 256], help="global batch sizes for fp32/bf16 training")
    parser.add_argument("--sentences", type=int, default=20000, help="synthetic training sentences (default: 20000)")
    parser.add_argument("--architecture", default="BidLSTM_CRF")
    parser.add_argument("--precisions", nargs="*", default=None, help="default: fp32 bf16 (and fp16 on CUDA)")
    parser.add_argument("--transformer-size", choices=["none", "minilm", "base"], default="minilm",
                        help="also train/tag BERT_CRF on a random encoder of this shape (default: minilm)")
    parser.add_argument("--transformer-sentences", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="tiny corpus and one batch size: checks that the script runs")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("extra", nargs="*", help="further 'seq train' options after --, e.g. -- --transformer DIR")
    opts = parser.parse_args()
    if opts.quick:
        opts.sentences, opts.batch_sizes, opts.transformer_sentences = 60, opts.batch_sizes[:1], 60
    precisions = opts.precisions or (["fp32", "bf16", "fp16"] if opts.device == "cuda" else ["fp32", "bf16"])
    if opts.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: use --device cpu (which measures CPU processes, not GPUs)")
    counts = device_counts(opts)
    rows = []
    with tempfile.TemporaryDirectory(prefix="textorch-bench-gpu-") as tmp:
        work = Path(tmp)
        data = work / "train.conll"
        n_tokens = write_corpus(data, opts.sentences)
        print(f"synthetic corpus: {opts.sentences} sentences, {n_tokens} tokens; devices {counts} ({opts.device})", flush=True)
        suites = [(opts.architecture, data, list(opts.extra), opts.batch_sizes)]
        if opts.transformer_size != "none":
            bert_data = work / "train-bert.conll"
            write_corpus(bert_data, opts.transformer_sentences, seed=1)
            encoder = write_random_encoder(work / f"random-{opts.transformer_size}", opts.transformer_size)
            suites.append(("BERT_CRF", bert_data, ["--transformer", str(encoder)], opts.batch_sizes[:1]))
        for architecture, corpus, extra, batch_sizes in suites:
            model = work / f"model-{architecture}"
            for devices in counts:
                for precision in precisions:
                    for batch in batch_sizes:
                        rows.append(train_run(corpus, model, devices, precision, batch, opts, architecture, extra))
                        print(rows[-1], flush=True)
                rows.append(tag_run(corpus, model, devices, 256, opts, work, architecture))
                print(rows[-1], flush=True)
    base = {(r["architecture"], r["task"], r["precision"], r["batch"]): r["tokens_per_s"] for r in rows if r["devices"] == counts[0]}
    for row in rows:
        reference = base.get((row["architecture"], row["task"], row["precision"], row["batch"]))
        row["speedup"] = round(row["tokens_per_s"] / reference, 2) if reference and row["tokens_per_s"] else None
    print()
    print_table(rows, ["architecture", "task", "devices", "precision", "batch", "tokens_per_s", "speedup", "wall_s"])
    gpu = torch.cuda.get_device_name(0) if opts.device == "cuda" else None
    # A CPU check must not overwrite the GPU measurements.
    path = write_json("bench_gpu" if opts.device == "cuda" else "bench_gpu_cpu_check", {"machine": {**machine(), "gpu": gpu, "device": opts.device},
                                    "architecture": opts.architecture, "sentences": opts.sentences,
                                    "tokens": n_tokens, "rows": rows})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
