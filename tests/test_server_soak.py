"""``textorch serve`` under load and abuse (issue 8): 16 concurrent clients, 2,000 requests mixing
valid, malformed, oversized, slow and stalled ones, against the real command on 127.0.0.1.

Zero 5xx, every valid request answered as the Python API answers, the server's memory bounded,
no traceback in its log, and ``/health`` still answering afterwards. The longer version is
``benchmarks/soak_server.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
import torch

from conftest import REPO, write_tiny_conll
from server_abuse import Expected, build_requests, run_load, summary, valid_kinds

MAX_BYTES = 16 * 1024
CLIENT_TIMEOUT_S = 1.0
RSS_GROWTH_LIMIT_MB = 40
"""Allowed growth of the server's resident memory over 2,000 requests, after a warm-up of 300:
a leak of a few kilobytes per request would pass it, so the test also checks that the second
half of the run grows the memory less than this bound's half (see below)."""
TEXTS = [
    "Mary lives in Rome .", "John lives in Paris", "Anna and Peter live in Berlin .", "", "   ",
    "Madrid", "Mary\u0000 lives in Rome", "Rome \ud800 broken surrogate", "Peter 🙂 Berlin",
    "שלום Paris", "tab\tseparated\u2028line", "x" * 1500, ". , ; : ! ?" * 20,
]


def _train_models(root: Path) -> dict[str, Path]:
    from textorch import SequenceLabeler
    from textorch.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
    from textorch.config import TrainConfig
    from textorch.data.cls_readers import ClsCorpus, ClsExample

    SequenceLabeler.train(str(write_tiny_conll(root / "tiny.conll")), output=root / "ner", max_epoch=2, batch_size=8,
                          learning_rate=0.01, seed=1, early_stop=False, char_dim=8, char_hidden=8, word_hidden=8)
    pairs = [("a good paper .", "positive"), ("a bad method .", "negative"), ("the table .", "neutral")] * 6
    corpus = ClsCorpus([ClsExample(text, (label,), i + 1) for i, (text, label) in enumerate(pairs)])
    classifier = TextClassifier.build(corpus, ClsModelConfig(architecture="gru", hidden=8, dense_size=8, word_dim=8),
                                      ClsDataConfig(), seed=1)
    classifier.fit(corpus, None, TrainConfig(max_epoch=1, batch_size=8, early_stop=False, seed=1))
    classifier.save(root / "sentiment")
    return {"ner": root / "ner", "sentiment": root / "sentiment"}


def _expected(models: dict[str, Path]) -> Expected:
    from textorch import SequenceLabeler
    from textorch.classifier import TextClassifier

    labeler = SequenceLabeler.load(models["ner"])
    classifier = TextClassifier.load(models["sentiment"])
    tags = {text: labeler.tag([text], model_name="ner")["texts"][0] for text in TEXTS}
    classes = {text: {"labels": p.labels, "scores": p.scores} for text, p in
               ((text, classifier.predict([text])[0]) for text in TEXTS)}
    return Expected("ner", "sentiment", TEXTS, tags, classes)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, subprocess.Popen, Expected, Path]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        root = tmp_path_factory.mktemp("soak")
        models = _train_models(root)
        expected = _expected(models)
    finally:
        torch.set_num_threads(threads)
    port, log = _free_port(), root / "server.log"
    command = [sys.executable, "-m", "textorch.cli.main", "serve", "--model", f"ner={models['ner']}",
               "--model", f"sentiment={models['sentiment']}", "--port", str(port), "--threads", "1",
               "--max-request-bytes", str(MAX_BYTES), "--client-timeout", str(CLIENT_TIMEOUT_S)]
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        yield port, process, expected, log
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_two_thousand_mixed_requests_from_16_clients(server: tuple) -> None:
    port, process, expected, log = server
    warm = asyncio.run(run_load("127.0.0.1", port, build_requests(expected, 300, MAX_BYTES, CLIENT_TIMEOUT_S, seed=1), 16))
    assert warm.failures == [], warm.failures[:5]
    rss_start = _rss_mb(process.pid)

    requests = build_requests(expected, 2000, MAX_BYTES, CLIENT_TIMEOUT_S, seed=2)
    rss_half: list[float] = []
    report = asyncio.run(run_load("127.0.0.1", port, requests, 16,
                                  on_progress=lambda n: rss_half.append(_rss_mb(process.pid)) if n == 1000 else None))
    rss_end = _rss_mb(process.pid)
    print(summary(report), f"RSS {rss_start:.1f} -> {rss_half[0]:.1f} -> {rss_end:.1f} MB")

    assert report.server_errors == 0
    assert report.failures == [], report.failures[:5]
    assert sum(report.counts.values()) == 2000
    assert set(report.counts) >= valid_kinds() | {"malformed", "oversized", "not http", "stalled", "abandoned"}
    assert sum(report.counts[k] for k in valid_kinds()) > 900  # all of them answered correctly (no failures)
    assert rss_end - rss_start < RSS_GROWTH_LIMIT_MB
    assert rss_end - rss_half[0] < RSS_GROWTH_LIMIT_MB / 2

    health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert health.json()["batching"]["requests"] >= sum(report.counts[k] for k in valid_kinds())
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text[-2000:]
