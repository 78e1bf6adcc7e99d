"""Tagging results in DeLFT's JSON structure, which GROBID users already parse.

One deliberate difference: ``endOffset`` is exclusive (``text[beginOffset:endOffset]`` is the
entity), where DeLFT's was inclusive.
"""

from __future__ import annotations


from textorch.data.corpus import TokenSequence
from textorch.data.writers import answer_header
from textorch.eval.metrics import extract_entities
from textorch.tagging.prediction import Prediction


def entities(sequence: TokenSequence, prediction: Prediction) -> list[dict]:
    """Entities of one tagged text with character offsets and the mean token confidence."""
    found = []
    offsets = sequence.offsets
    text = sequence.text
    for label, start, end in extract_entities(prediction.labels):
        entity: dict = {"class": label}
        if offsets is not None and text is not None:
            begin, finish = offsets[start][0], offsets[end - 1][1]
            entity["text"] = text[begin:finish]
            entity["beginOffset"], entity["endOffset"] = begin, finish
        else:
            entity["text"] = " ".join(sequence.tokens[start:end])
            entity["beginToken"], entity["endToken"] = start, end
        if prediction.scores is not None:  # labels-only predictions carry no confidence
            entity["score"] = round(sum(prediction.scores[start:end]) / (end - start), 6)
        found.append(_ordered(entity))
    return found


def _ordered(entity: dict) -> dict:
    order = ("text", "class", "score", "beginOffset", "endOffset", "beginToken", "endToken")
    return {key: entity[key] for key in order if key in entity}


def tagging_document(
    model_name: str, sequences: list[TokenSequence], predictions: list[Prediction], runtime_s: float
) -> dict:
    """The whole JSON answer: software, model, date, runtime and one record per text."""
    return {
        **answer_header(model_name, runtime_s),
        "texts": [
            {"text": s.text if s.text is not None else " ".join(s.tokens), "entities": entities(s, p)}
            for s, p in zip(sequences, predictions)
        ],
    }
