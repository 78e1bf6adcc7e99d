"""Load test of ``textorch serve``: concurrent clients each sending one-sequence requests (GROBID's pattern).

A GROBID date model is trained (or ``--model DIR`` is used), a server is started on 127.0.0.1 for
each batching setting, and for each number of clients every client sends pre-tokenised
sequences with their feature columns, one per request, back to back, until ``--requests`` have
been answered or ``--seconds`` have passed. Reported: requests/s, p50/p99 latency and the mean
number of requests per forward pass (from the server's /health counters).

Usage (from the repository root):
    .venv/bin/python -m benchmarks bench_server
    .venv/bin/python -m benchmarks bench_server --clients 1 16 64 --windows 0 2 10 --requests 3000

The clients run in this process (asyncio + httpx) and the server in another; on a small machine
both compete for the same cores, so the figures are a lower bound for a dedicated server.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.common import REPO, machine, print_table, shared, write_json  # noqa: E402

from textorch.data.readers import read_labelled  # noqa: E402

DATE = "grobid/date/date-220311.train"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def train_model(directory: Path, args: argparse.Namespace) -> None:
    from textorch.tagging.training import train_sequence_labeler

    train_sequence_labeler(str(shared("data", DATE)), output=directory, architecture=args.architecture,
                           embeddings=args.embeddings, max_epoch=args.max_epoch, seed=1, cache_dir=args.cache_dir)


def request_payloads(limit: int) -> list[dict]:
    """One request per sequence of the date data: tokens with all their feature columns."""
    corpus = read_labelled(shared("data", DATE))
    payloads = []
    for sequence in corpus.sequences[:limit]:
        tokens = [[token, *features] for token, features in zip(sequence.tokens, sequence.features)]
        payloads.append({"sequences": [tokens]})
    return payloads


class Server:
    """``textorch serve`` in a subprocess, on a free loopback port."""

    def __init__(self, model: Path, window_ms: float, args: argparse.Namespace) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "textorch.cli.main", "serve", "--model", f"date={model}",
                   "--port", str(self.port), "--batch-window-ms", str(window_ms),
                   "--max-batch-size", str(args.max_batch_size)]
        if args.threads:
            command += ["--threads", str(args.threads)]
        if args.cache_dir:
            command += ["--cache-dir", args.cache_dir]
        command += ["--device", args.device]
        if args.engine:
            command += ["--engine", args.engine]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"server exited: {self.process.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise SystemExit("server did not start")

    def batching(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()["batching"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def _client(url: str, payloads: list[dict], offset: int, budget: dict, latencies: list[float]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        index = offset
        while budget["left"] > 0 and time.perf_counter() < budget["deadline"]:
            budget["left"] -= 1
            started = time.perf_counter()
            response = await http.post("/models/date/tag", json=payloads[index % len(payloads)])
            if response.status_code != 200:
                raise SystemExit(f"HTTP {response.status_code}: {response.text[:500]}")
            latencies.append(time.perf_counter() - started)
            index += 1


async def load(url: str, payloads: list[dict], clients: int, requests: int, seconds: float) -> dict:
    latencies: list[float] = []
    budget = {"left": requests, "deadline": time.perf_counter() + seconds}
    started = time.perf_counter()
    await asyncio.gather(*(_client(url, payloads, c * 997, budget, latencies) for c in range(clients)))
    wall = time.perf_counter() - started
    ms = np.asarray(latencies) * 1000
    return {
        "requests": len(latencies),
        "wall_s": round(wall, 3),
        "req_per_s": len(latencies) / wall,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
    }


def run_setting(model: Path, window_ms: float, payloads: list[dict], args: argparse.Namespace) -> list[dict]:
    server = Server(model, window_ms, args)
    rows = []
    try:
        server.wait_ready()
        asyncio.run(load(server.url, payloads, 4, 100, 30))  # warm-up: first calls, allocator, caches
        for clients in args.clients:
            before = server.batching()
            row = asyncio.run(load(server.url, payloads, clients, args.requests, args.seconds))
            after = server.batching()
            batches = after["batches"] - before["batches"]
            row = {"window_ms": int(window_ms) if float(window_ms).is_integer() else window_ms, "clients": clients, **row,
                   "requests_per_batch": (after["requests"] - before["requests"]) / max(batches, 1)}
            print_table([row], COLUMNS)
            rows.append(row)
    finally:
        server.stop()
    return rows


COLUMNS = ["window_ms", "clients", "requests", "req_per_s", "p50_ms", "p99_ms", "requests_per_batch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="model directory to serve (default: train a date model)")
    parser.add_argument("--architecture", default="BidLSTM_CRF")
    parser.add_argument("--embeddings", default=None, help="word vectors (default: ../shared w2v-conll-grobid-100d)")
    parser.add_argument("--max-epoch", type=int, default=10)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--windows", type=float, nargs="+", default=[0, 5], help="batch windows in ms (0: off)")
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000, help="requests per measurement at most")
    parser.add_argument("--seconds", type=float, default=20, help="seconds per measurement at most")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads in the server (default 1: the clients need the other core here)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"], help="the server's device")
    parser.add_argument("--engine", default=None, choices=["torch", "onnx", "auto"],
                        help="the server's --engine (default: the server's own default)")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--name", default="server-date")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.embeddings is None:
        args.embeddings = str(shared("embeddings", "w2v-conll-grobid-100d.txt"))
    payloads = request_payloads(2000)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="textorch-bench-server-") as scratch:
        model = args.model
        if model is None:
            model = Path(scratch) / "date"
            train_model(model, args)
        rows = [row for window in args.windows for row in run_setting(model, window, payloads, args)]
    print()
    print_table(rows, COLUMNS)
    n_tokens = [len(p["sequences"][0]) for p in payloads]
    payload = {"machine": machine(), "rows": rows, "command": " ".join(sys.argv),
               "model": str(args.model.name if args.model else
                            f"trained: {args.architecture}, {args.max_epoch} epochs, {Path(args.embeddings).name}"),
               "tokens_per_request_mean": float(np.mean(n_tokens)), "server_threads": args.threads,
               "engine": args.engine or "the server's default",
               # the machine's load average before and after: other work on it makes the figures noisy
               "load_average": {"before": load_before, "after": os.getloadavg()}}
    print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print(f"wrote {write_json(args.name, payload)}")


if __name__ == "__main__":
    main()
