"""Serving text classifiers: the function a batcher runs and the JSON answer.

Both reuse the classification library: ``TextClassifier.predict`` computes, and the answer is
``cls classify``'s own JSON document (``classification.answer.texts_document``), so the server
and the CLI cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Callable

from textorch.serve.config import ServerConfig
from textorch.serve.models import ServedModel


def classification_runner(model: ServedModel, config: ServerConfig) -> Callable[[list[str]], list[Any]]:
    classifier = model.predictor

    def run(texts: list[str]) -> list[Any]:
        return classifier.predict(texts, batch_size=config.max_batch_size)

    return run


def classify_answer(model: ServedModel, texts: list[str], predictions: list[Any], runtime_s: float) -> dict:
    """``{"software", "version", "model", "date", "runtime", "classes", "multi_label", "classifications":
    [{"text", "scores", "labels"}]}``, in request order."""
    from textorch.classification.answer import texts_document

    return texts_document(model.name, model.predictor, texts, predictions, runtime_s)
