"""A saved classifier, opened as the user's engine options ask: every door's one way in.

The choice of engine is :mod:`textorch.onnx.opening`'s; this module gives it the classification
task's way of opening a model directory, :meth:`TextClassifier.load` in PyTorch (a classifier has
no torch-free runner).
"""

from __future__ import annotations

from pathlib import Path

from textorch.classification.classifier import TextClassifier
from textorch.onnx.opening import EngineOptions, Opened, open_predictor


def open_classifier(directory: str | Path, options: EngineOptions | None = None, *,
                    cache_dir: str | Path | None = None, embeddings: object | None = None) -> Opened:
    """The classifier of ``directory`` and what runs it (``options`` default to ``auto`` on the CPU)."""

    def load(path: str | Path, device: object) -> TextClassifier:
        return TextClassifier.load(path, device=device, embeddings=embeddings, cache_dir=cache_dir,  # type: ignore[arg-type]
                                   engine="torch")

    return open_predictor(directory, options or EngineOptions(), load)
