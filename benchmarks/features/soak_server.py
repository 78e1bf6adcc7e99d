"""Long soak of ``textorch serve``: rounds of mixed valid and abusive requests, memory watched.

The short version runs in the test suite (``tests/serve/test_server_soak.py``); this one keeps going
for ``--rounds`` rounds of ``--requests`` requests from ``--clients`` concurrent clients, or
until ``--seconds`` have passed, whichever comes first, against a server on 127.0.0.1 only.
The request mix (``benchmarks/server_abuse.py``): about half valid requests (tag raw texts, tag
token lists, classify, and some sent a few bytes at a time), the rest malformed JSON, wrong
schemas, wrong content types, oversized bodies (declared and chunked), unknown paths, bytes
that are not HTTP, clients that hang up without reading, and clients that stall until the
server drops them.

Reported per round: requests/s, statuses, failures (a 5xx, a valid request answered wrongly,
an abuse answered otherwise than it must be), p99 latency of valid tag requests and the
server's resident memory. Exit status 1 when any round has a failure.

Usage (from the repository root):
    .venv/bin/python -m benchmarks soak_server
    .venv/bin/python -m benchmarks soak_server --rounds 20 --requests 5000 --clients 64 --seconds 900
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, print_table, write_json
from benchmarks.server_abuse import build_requests, run_load, summary
from benchmarks.tiny_server import ServerProcess, expected_answers, train_tiny_models

MAX_BYTES = 16 * 1024


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds of requests at most (default: 10)")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round (default: 2000)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (default: 32)")
    parser.add_argument("--seconds", type=float, default=300.0, help="stop after the round that passes this (default: 300)")
    parser.add_argument("--client-timeout", type=float, default=2.0, help="the server's --client-timeout (default: 2)")
    parser.add_argument("--threads", type=int, default=1, help="the server's torch threads (default: 1)")
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    rows, rounds = [], []
    with tempfile.TemporaryDirectory(prefix="textorch-soak-") as scratch:
        root = Path(scratch)
        models = train_tiny_models(root)
        expected = expected_answers(models)
        server = ServerProcess(models, root / "server.log", MAX_BYTES, args.client_timeout, ["--threads", str(args.threads)])
        try:
            server.wait_ready()
            rss_start = server.rss_mb()
            started = time.monotonic()
            for k in range(args.rounds):
                requests = build_requests(expected, args.requests, MAX_BYTES, args.client_timeout, seed=100 + k)
                report = asyncio.run(run_load("127.0.0.1", server.port, requests, args.clients))
                described = summary(report)
                tag_latency = described["kinds"].get("valid tag", {}).get("p99_ms")
                rows.append({"round": k + 1, "requests": described["requests"], "seconds": report.seconds,
                             "req_per_s": described["requests"] / max(report.seconds, 1e-9),
                             "5xx": report.server_errors, "failures": len(report.failures),
                             "tag_p99_ms": tag_latency, "rss_mb": server.rss_mb()})
                rounds.append(described)
                print_table(rows[-1:], list(rows[-1]))
                if time.monotonic() - started > args.seconds:
                    break
            health = server.health().status_code
            log = server.log.read_text(errors="replace")
        finally:
            server.stop()
    tracebacks = log.count("Traceback")
    print()
    print_table(rows, list(rows[0]))
    print(f"\nserver RSS {rss_start:.1f} MB before, {rows[-1]['rss_mb']:.1f} MB after; /health {health}; "
          f"tracebacks in the server log: {tracebacks}")
    path = write_json("soak_server", {"machine": machine(), "clients": args.clients, "rss_start_mb": rss_start,
                                      "rounds": rows, "details": rounds, "health_after": health,
                                      "tracebacks": tracebacks})
    print(f"written {path}")
    failed = any(r["5xx"] or r["failures"] for r in rows) or health != 200 or tracebacks
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
