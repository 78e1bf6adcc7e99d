"""Data-parallel throughput: training and tagging tokens/s per device count, precision and batch size.

Meant for a machine with one or more GPUs; runs the real commands (``textorch seq train`` /
``seq tag`` with ``--devices N``) on a synthetic corpus, so launcher, DDP, sharded validation
and gathering are all in the measurement. Training speed is the second epoch's (the first
includes warm-up); tagging speed is from ``--stats-json``.

Usage (from the repository root):
    .venv/bin/python benchmarks/bench_gpu.py                       # all GPUs, about 4 minutes
    .venv/bin/python benchmarks/bench_gpu.py --devices 1 2 4 8 --batch-sizes 32 256
    .venv/bin/python benchmarks/bench_gpu.py --device cpu --quick  # check the script on a CPU

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, machine, print_table, write_json  # noqa: E402

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


def train_run(data: Path, model: Path, devices: int, precision: str, batch: int, opts: argparse.Namespace) -> dict:
    args = ["seq", "train", "--train", str(data), "--output", str(model), "--max-epoch", "2", "--early-stop", "false",
            "--batch-size", str(batch), "--devices", str(devices), "--device", opts.device, "--precision", precision,
            "--architecture", opts.architecture, *opts.extra]
    started = time.perf_counter()
    result = textorch(args, opts.timeout)
    match = EPOCH_LINE.search(result.stderr)
    return {"task": "train", "devices": devices, "precision": precision, "batch": batch,
            "tokens_per_s": float(match.group(1)) if match else None, "wall_s": round(time.perf_counter() - started, 1)}


def tag_run(data: Path, model: Path, devices: int, batch: int, opts: argparse.Namespace, work: Path) -> dict:
    stats = work / f"tag-{devices}.json"
    args = ["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", "conll", "--output",
            str(work / "tagged.conll"), "--batch-size", str(batch), "--devices", str(devices), "--device", opts.device,
            "--stats-json", str(stats)]
    started = time.perf_counter()
    textorch(args, opts.timeout)
    return {"task": "tag", "devices": devices, "precision": "fp32", "batch": batch,
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
    parser.add_argument("--quick", action="store_true", help="tiny corpus and one batch size: checks that the script runs")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("extra", nargs="*", help="further 'seq train' options after --, e.g. -- --transformer DIR")
    opts = parser.parse_args()
    if opts.quick:
        opts.sentences, opts.batch_sizes = 60, opts.batch_sizes[:1]
    if opts.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: use --device cpu (which measures CPU processes, not GPUs)")
    counts = device_counts(opts)
    rows = []
    with tempfile.TemporaryDirectory(prefix="textorch-bench-gpu-") as tmp:
        work = Path(tmp)
        data = work / "train.conll"
        n_tokens = write_corpus(data, opts.sentences)
        print(f"synthetic corpus: {opts.sentences} sentences, {n_tokens} tokens; devices {counts} ({opts.device})", flush=True)
        model = work / "model"
        for devices in counts:
            for precision in ("fp32", "bf16"):
                for batch in opts.batch_sizes:
                    rows.append(train_run(data, model, devices, precision, batch, opts))
                    print(rows[-1], flush=True)
            rows.append(tag_run(data, model, devices, 256, opts, work))
            print(rows[-1], flush=True)
    base = {(r["task"], r["precision"], r["batch"]): r["tokens_per_s"] for r in rows if r["devices"] == counts[0]}
    for row in rows:
        reference = base.get((row["task"], row["precision"], row["batch"]))
        row["speedup"] = round(row["tokens_per_s"] / reference, 2) if reference and row["tokens_per_s"] else None
    print()
    print_table(rows, ["task", "devices", "precision", "batch", "tokens_per_s", "speedup", "wall_s"])
    gpu = torch.cuda.get_device_name(0) if opts.device == "cuda" else None
    # A CPU check must not overwrite the GPU measurements.
    path = write_json("bench_gpu" if opts.device == "cuda" else "bench_gpu_cpu_check", {"machine": {**machine(), "gpu": gpu, "device": opts.device},
                                    "architecture": opts.architecture, "sentences": opts.sentences,
                                    "tokens": n_tokens, "rows": rows})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
