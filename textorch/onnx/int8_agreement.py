"""The float and the int8 graph of an export run side by side over a model's own data.

Both graphs run through the predictor's own ``predict`` with an ONNX runner attached, as
``--engine onnx`` and ``--engine onnx --quantized`` run them, so what is compared is what a user
of either would get: a tagger's labels, a classifier's predicted classes. The data is the
model's validation data, then (where it holds fewer than :data:`~textorch.onnx.int8_rule.MIN_UNITS`
units, or there is none) its training data in a seeded random order, bounded so that the check
costs seconds on any corpus.

The predictor is given back as it came (its ``runner`` set back); the shared engine asks the
object its task rather than importing either task's class.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path

from textorch import __version__
from textorch.eval.metrics import evaluate_sequences
from textorch.onnx.engine import OnnxClassifierRunner, OnnxRunner
from textorch.onnx.files import ONNX_FILE, QUANTIZED_FILE
from textorch.onnx.int8_rule import MIN_UNITS, Int8Check
from textorch.onnx.layout import read_description

MAX_TOKENS = 20_000
"""A tagger's check reads at most this many tokens: enough to see a 0.5 % disagreement a hundred
times over, and a bounded cost whatever the corpus."""
MAX_TEXTS = 2_000
"""A classifier's check reads at most this many texts."""


def check_int8(predictor, export_dir: str | Path, valid, train, seed: int = 0, threads: int | None = None) -> Int8Check:
    """The float and int8 graphs of ``export_dir`` (an export of ``predictor``, made with
    ``quantize``) compared on ``valid`` then ``train`` (a ``Corpus`` for a tagger, a
    ``ClsCorpus`` for a classifier; either may be None)."""
    directory = Path(export_dir)
    description = read_description(directory) or {}
    started = time.perf_counter()
    previous = predictor.runner
    try:
        if predictor.task == "text_classification":
            numbers = _classifier_numbers(predictor, directory, valid, train, seed, threads)
        else:
            numbers = _tagger_numbers(predictor, directory, valid, train, seed, threads)
    finally:
        predictor.runner = previous
    return Int8Check(task=predictor.task, **numbers, source_weights_sha256=description.get("source_weights_sha256"),
                     int8_revision=description.get("int8_revision"), textorch_version=__version__,
                     seconds=round(time.perf_counter() - started, 3))


def _taken(valid_items: list, train_items: list, size, bound: int, seed: int) -> tuple[list, dict]:
    """Validation items (in a seeded order, up to ``bound`` units), then training items up to
    ``bound`` where the validation ones hold fewer than ``MIN_UNITS`` units. An item larger than
    what is left of the bound is passed over; empty items are left out."""
    rng = random.Random(seed)
    taken: list = []
    counts = {"validation": 0, "training": 0}
    total = 0
    for source, items in (("validation", valid_items), ("training", train_items)):
        if source == "training" and total >= MIN_UNITS:
            break
        order = list(range(len(items)))
        rng.shuffle(order)
        for i in order:
            n = size(items[i])
            if n and total + n <= bound:
                taken.append(items[i])
                counts[source] += 1
                total += n
    return taken, counts


def _tagger_numbers(labeler, directory: Path, valid, train, seed: int, threads: int | None) -> dict:
    sequences, data = _taken(valid.sequences if valid is not None else [], train.sequences if train is not None else [],
                             len, MAX_TOKENS, seed)
    outputs = []
    for name in (ONNX_FILE, QUANTIZED_FILE):
        labeler.runner = None  # one session at a time: each holds a copy of the weights
        labeler.runner = OnnxRunner(directory / name, labeler.model.head, threads)
        outputs.append([p.labels for p in labeler.predict(sequences, with_scores=False)])
    float_labels, int8_labels = outputs
    gold = [s.labels for s in sequences]
    same = [sum(a == b for a, b in zip(x, y)) for x, y in zip(float_labels, int8_labels)]
    return {
        "unit": "tokens", "sequences": len(sequences), "units": sum(len(s) for s in sequences),
        "agreeing_units": sum(same), "changed_sequences": sum(n != len(s) for n, s in zip(same, sequences)),
        "f1_float": 100 * evaluate_sequences(gold, float_labels)["f1"],
        "f1_int8": 100 * evaluate_sequences(gold, int8_labels)["f1"], "data": data,
    }


def _classifier_numbers(classifier, directory: Path, valid, train, seed: int, threads: int | None) -> dict:
    examples, data = _taken(valid.examples if valid is not None else [], train.examples if train is not None else [],
                            lambda example: 1, MAX_TEXTS, seed)
    corpus = replace(train if train is not None else valid, examples=examples)
    texts = [e.text for e in examples]
    outputs, f1 = [], []
    for name in (ONNX_FILE, QUANTIZED_FILE):
        classifier.runner = None  # one session at a time: each holds a copy of the weights
        classifier.runner = OnnxClassifierRunner(directory / name, threads)
        outputs.append([sorted(p.labels) for p in classifier.predict(texts)])
        f1.append(100 * classifier.evaluate(corpus)["macro"]["f1"])
    agreeing = sum(a == b for a, b in zip(*outputs))
    return {
        "unit": "texts", "sequences": len(texts), "units": len(texts), "agreeing_units": agreeing,
        "changed_sequences": len(texts) - agreeing, "f1_float": f1[0], "f1_int8": f1[1], "data": data,
    }
