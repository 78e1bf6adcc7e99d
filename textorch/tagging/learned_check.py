"""Whether a trained tagger learned anything: the check before a model is kept.

A run without validation keeps its last epoch, and a run whose validation F1 never moved keeps
its last epoch too; either can end with a network that gives every token the most frequent
label (``<other>``, ``<body>``, ``<paragraph>``) or no field at all. Such a model scores well on
token accuracy and is useless, and it used to be saved as if it were a result. Its own training
data tells it apart at once: a model that predicts a single label there, where the data has
several, learned nothing, and the run says so in a warning. It is not refused: a one-epoch trial
of a pipeline is a legitimate run whose model may well know nothing yet. Where validation picks
the epoch, such an epoch is never the one kept (:func:`textorch.tagging.scoring.epoch_choice_score`).
"""

from __future__ import annotations

from collections import Counter

from textorch.data.corpus import Corpus
from textorch.data.tags import OUTSIDE
from textorch.tagging.labeler import SequenceLabeler

SAMPLE_TOKENS = 20_000
"""Training tokens the check tags (the first sequences up to this count, at least one): enough
to see every frequent label, a second or two of tagging."""


def label_type(label: str) -> str:
    return OUTSIDE if label == OUTSIDE else label[2:]


def nothing_to_learn(train: Corpus) -> str | None:
    """What is wrong when every label of the training data is ``O`` (GROBID's ``<other>``, outside
    any field: a file exported without its fields, a wrong label column); None otherwise. Said
    before training, which then learns to give every token ``O``."""
    labels = {label for sequence in train.sequences for label in (sequence.labels or ())}
    if labels != {OUTSIDE}:
        return None
    return (f"{train.path}: every label of the training data is {OUTSIDE} (GROBID's <other>: outside any field), "
            "so there is nothing to learn: the model will tag every token so; check the file's label column")


def learned_nothing(labeler: SequenceLabeler, train: Corpus) -> str | None:
    """What is wrong when ``labeler`` tags a sample of its own training data with one label type
    only (``O`` included) while the sample's gold labels hold several; None otherwise."""
    sample, tokens = [], 0
    for sequence in train.sequences:
        if tokens >= SAMPLE_TOKENS:
            break
        if len(sequence) and sequence.labels:
            sample.append(sequence)
            tokens += len(sequence)
    gold = Counter(label_type(label) for sequence in sample for label in sequence.labels or ())
    if len(gold) < 2:
        return None
    predictions = labeler.predict(sample, with_scores=False)
    predicted = Counter(label_type(label) for prediction in predictions for label in prediction.labels)
    if len(predicted) > 1:
        return None
    only = next(iter(predicted), OUTSIDE)
    what = "no field (every token outside)" if only == OUTSIDE else f"only {only}"
    common = ", ".join(f"{typ} {count}" for typ, count in gold.most_common(4))
    return (f"the trained model predicts {what} on {tokens:,} tokens of its own training data, which hold "
            f"{len(gold)} label types ({common}...): it learned nothing; train for more epochs (--max-epoch) "
            "or at another --learning-rate")
