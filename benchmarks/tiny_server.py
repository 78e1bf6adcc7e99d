"""The two tiny models a load or abuse run serves, the answers the server must give for them,
and ``textorch serve`` running them in a subprocess on a loopback port.

Shared, with the request mix of :mod:`benchmarks.server_abuse`, by
``benchmarks/features/soak_server.py`` and ``tests/serve/test_server_soak.py``. The models are
trained in seconds on generated data: a run checks the server's answers against the Python API's
for the same models, so their quality does not matter.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmarks.server_abuse import Expected

REPO = Path(__file__).resolve().parents[1]

TEXTS = [
    "Mary lives in Rome .", "John lives in Paris", "Anna and Peter live in Berlin .", "", "   ",
    "Madrid", "Mary\u0000 lives in Rome", "Rome \ud800 broken surrogate", "Peter \U0001F642 Berlin",
    "\u05e9\u05dc\u05d5\u05dd Paris", "tab\tseparated\u2028line", "x" * 1500, ". , ; : ! ?" * 20,
]
"""Texts the valid requests draw from: plain ones, empty ones, NUL, a lone surrogate, emoji,
right-to-left script, a Unicode line separator, a 1,500-character token, punctuation only."""


def train_tiny_models(root: Path) -> dict[str, Path]:
    """A tiny NER tagger and a tiny 3-class classifier (seconds on a CPU): their quality does not matter."""
    from benchmarks.common import write_generated_ner
    from textorch import train_sequence_labeler
    from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
    from textorch.tagging.config import TrainConfig
    from textorch.data.cls_readers import ClsCorpus, ClsExample

    train_sequence_labeler(str(write_generated_ner(root / "tiny.conll", 40)), output=root / "ner", max_epoch=2,
                           batch_size=8, learning_rate=0.01, seed=1, early_stop=False, char_dim=8, char_hidden=8,
                           word_hidden=8)
    pairs = [("a good paper .", "positive"), ("a bad method .", "negative"), ("the table .", "neutral")] * 6
    corpus = ClsCorpus([ClsExample(text, (label,), i + 1) for i, (text, label) in enumerate(pairs)])
    classifier = TextClassifier.build(corpus, ClsModelConfig(architecture="gru", hidden=8, dense_size=8, word_dim=8),
                                      ClsDataConfig(), seed=1)
    classifier.fit(corpus, None, TrainConfig(max_epoch=1, batch_size=8, early_stop=False, seed=1))
    classifier.save(root / "sentiment")
    return {"ner": root / "ner", "sentiment": root / "sentiment"}


def expected_answers(models: dict[str, Path], texts: list[str] = TEXTS) -> Expected:
    """The Python API's answer for each text alone: what the server must answer, batched or not."""
    from textorch import SequenceLabeler
    from textorch.classification.classifier import TextClassifier

    labeler = SequenceLabeler.load(models["ner"])
    classifier = TextClassifier.load(models["sentiment"])
    tags = {text: labeler.tag([text], model_name="ner")["texts"][0] for text in texts}
    classes = {text: {"labels": p.labels, "scores": p.scores} for text, p in
               ((text, classifier.predict([text])[0]) for text in texts)}
    return Expected("ner", "sentiment", list(texts), tags, classes)


class ServerProcess:
    """``textorch serve`` for the two models in a subprocess on a free loopback port."""

    def __init__(self, models: dict[str, Path], log: Path, max_bytes: int, client_timeout_s: float,
                 extra: list[str] | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = log
        command = [sys.executable, "-m", "textorch.cli.main", "serve", "--model", f"ner={models['ner']}",
                   "--model", f"sentiment={models['sentiment']}", "--host", "127.0.0.1", "--port", str(self.port),
                   "--max-request-bytes", str(max_bytes), "--client-timeout", str(client_timeout_s), *(extra or [])]
        with open(log, "wb") as sink:
            self.process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO,
                                            env={**os.environ, "PYTHONPATH": str(REPO)})

    def wait_ready(self, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)

    def rss_mb(self) -> float:
        """Resident memory of the server process now."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS in /proc")

    def health(self) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
