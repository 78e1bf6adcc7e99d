"""Tagging results in DeLFT's JSON structure, which GROBID users already parse.

One deliberate difference: ``endOffset`` is exclusive (``text[beginOffset:endOffset]`` is the
entity), where DeLFT's was inclusive.
"""

from __future__ import annotations


from textorch.data.corpus import TokenSequence
from textorch.data.tags import iob2_to_grobid
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
    model_name: str, sequences: list[TokenSequence], predictions: list[Prediction], runtime_s: float,
    labels_as: str | None = None,
) -> dict:
    """The whole JSON answer: software, model, date, runtime and one record per text.

    The one answer of every door (``SequenceLabeler.tag``, the server, the DeLFT facade, the
    demo). ``labels_as``: the model's input format when the texts came as token lists, whose
    records then carry their per-token labels (see :func:`text_record`); None for raw texts."""
    return {**answer_header(model_name, runtime_s),
            "texts": [text_record(s, p, labels_as) for s, p in zip(sequences, predictions)]}


def text_record(sequence: TokenSequence, prediction: Prediction, labels_as: str | None = None) -> dict:
    """One text's record of the answer; ``labels_as`` (the model's input format) adds its per-token
    labels, GROBID labels for a GROBID model and IOB2 otherwise (token-list input)."""
    text = sequence.text if sequence.text is not None else " ".join(sequence.tokens)
    record: dict = {"text": text, "entities": entities(sequence, prediction)}
    if labels_as is not None:
        labels = prediction.labels
        record["labels"] = iob2_to_grobid(labels) if labels_as == "grobid" else list(labels)
    return record
