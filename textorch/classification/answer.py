"""The JSON answer of a classification: ``cls classify``'s document, and the same for texts from
memory (``TextClassifier.classify``, the server). One builder for every door, which needs of the
classifier only its classes, so the class can build its answer here without this module knowing it."""

from __future__ import annotations

from typing import Protocol

from textorch.classification.prediction import ClsPrediction
from textorch.data.cls_readers import ClsCorpus, ClsExample
from textorch.data.writers import answer_header


class Classes(Protocol):
    """What an answer says of the model besides its predictions (a ``TextClassifier`` has both)."""

    classes: list[str]
    multi_label: bool


def classification_record(example: ClsExample, prediction: ClsPrediction) -> dict:
    """One text's record of :func:`classification_document`."""
    return {"text": example.text, "line": example.line, "scores": {c: round(s, 6) for c, s in prediction.scores.items()},
            "labels": prediction.labels}


def classification_document(model_name: str, classifier: Classes, corpus: ClsCorpus,
                            predictions: list[ClsPrediction], runtime_s: float) -> dict:
    """JSON answer of ``cls classify``: per text, its line, the class scores and the predicted class(es)."""
    return {
        **answer_header(model_name, runtime_s),
        "classes": classifier.classes,
        "multi_label": classifier.multi_label,
        "classifications": [classification_record(e, p) for e, p in zip(corpus.examples, predictions)],
    }


def texts_document(model_name: str, classifier: Classes, texts: list[str], predictions: list[ClsPrediction],
                   runtime_s: float) -> dict:
    """:func:`classification_document` for texts from memory (``TextClassifier.classify``, the
    server): no file line numbers."""
    corpus = ClsCorpus([ClsExample(text) for text in texts])
    document = classification_document(model_name, classifier, corpus, predictions, runtime_s)
    for record in document["classifications"]:
        record.pop("line", None)
    return document
