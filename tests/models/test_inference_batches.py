"""Tagging batches cut where lengths spread: same sequences, never larger batches, same answers."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from textorch.tagging import labeler as labeler_module
from textorch.data.batching import sorted_batches
from textorch.data.corpus import TokenSequence
from textorch.models.costs import INFERENCE_GROUP_COSTS
from textorch.models.inference_batches import inference_batches
from textorch.tagging.training import train_sequence_labeler


def _spread_lengths(seed: int, n: int = 150) -> list[int]:
    """Mostly short sequences with a long tail, as GROBID headers are."""
    rng = random.Random(seed)
    return [rng.choice([1, 2, 3, 5, 8]) if rng.random() < 0.8 else rng.randint(20, 300) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("batch_size", [32, 256])
def test_cut_batches_hold_every_sequence_once_and_never_more_than_batch_size(seed: int, batch_size: int) -> None:
    lengths = _spread_lengths(seed)
    whole = sorted_batches(lengths, batch_size)
    cut = inference_batches(lengths, batch_size, INFERENCE_GROUP_COSTS)
    assert sorted(i for batch in cut for i in batch) == list(range(len(lengths)))
    assert all(0 < len(batch) <= batch_size for batch in cut)
    assert len(cut) > len(whole)  # the long tail is cut off
    # Less padding to run: rows times the longest row, summed over calls.
    padded = lambda batches: sum(len(b) * max(lengths[i] for i in b) for b in batches)  # noqa: E731
    assert padded(cut) < (0.9 if batch_size == 32 else 0.5) * padded(whole)
    # Each cut batch is a run of one sorted batch.
    for batch in cut:
        parent = next(w for w in whole if batch[0] in w)
        start = parent.index(batch[0])
        assert parent[start : start + len(batch)] == batch


def test_batches_of_similar_lengths_are_not_cut_and_the_switch_turns_cutting_off() -> None:
    similar = [14, 15, 16, 17, 18, 19, 20, 21] * 8
    assert inference_batches(similar, 32, INFERENCE_GROUP_COSTS) == sorted_batches(similar, 32)
    spread = _spread_lengths(0)
    assert inference_batches(spread, 256, None) == sorted_batches(spread, 256)
    assert inference_batches([7], 32, INFERENCE_GROUP_COSTS) == [[0]]
    assert inference_batches([], 32, INFERENCE_GROUP_COSTS) == []
    # Who cuts (the call's CPU routes): tests/models/test_cpu_routes.py.


def _cut_then_whole(monkeypatch: pytest.MonkeyPatch, module: object, run, sizes: list[int]) -> tuple:
    """``run()``'s result and the batch sizes it recorded in ``sizes``, with batches cut, then the
    same with the cuts turned off where ``module`` calls :func:`inference_batches`."""
    cut = run()
    cut_sizes = list(sizes)
    sizes.clear()
    monkeypatch.setattr(module, "inference_batches", lambda lengths, size, costs: inference_batches(lengths, size, None))
    return cut, cut_sizes, run(), list(sizes)


def test_tagging_in_cut_batches_gives_the_answers_of_whole_batches(tiny_conll: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    labeler = train_sequence_labeler(tiny_conll, max_epoch=2, seed=3, word_hidden=8, char_hidden=4)
    words = ["John", "lives", "in", "Paris", "Mary", "Rome", ".", "Berlin"]
    rng = random.Random(5)
    sequences = [TokenSequence(tokens=[rng.choice(words) for _ in range(n)], labels=None, features=None)
                 for n in _spread_lengths(3, 60)] + [TokenSequence(tokens=[], labels=None, features=None)]
    calls: list[int] = []
    decode = labeler.model.decode
    monkeypatch.setattr(labeler.model, "decode", lambda batch, **kw: calls.append(batch.mask.shape[0]) or decode(batch, **kw))
    cut, cut_calls, whole, whole_calls = _cut_then_whole(monkeypatch, labeler_module,
                                                         lambda: labeler.predict(sequences, batch_size=256), calls)
    assert whole_calls == [60] and len(cut_calls) > 1 and sum(cut_calls) == 60
    assert [p.labels for p in cut] == [p.labels for p in whole]
    assert [len(p.labels) for p in cut] == [len(s.tokens) for s in sequences]
    assert np.allclose([x for p in cut for x in p.scores], [x for p in whole for x in p.scores], atol=1e-5)


@pytest.mark.parametrize("architecture", ["gru", "cnn"])
def test_classifying_in_cut_batches_gives_the_logits_of_whole_batches(architecture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.classification import classifier as classifier_module
    from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
    from textorch.tagging.config import TrainConfig
    from textorch.data.cls_readers import ClsCorpus, ClsExample

    rng = random.Random(7)
    words = ["good", "bad", "table", "the", "was", "very", "paper"]
    examples = [ClsExample(" ".join(rng.choice(words) for _ in range(n)), (["pos", "neg"][i % 2],), i + 2)
                for i, n in enumerate(_spread_lengths(4, 60))]
    classifier = TextClassifier.build(ClsCorpus(examples), ClsModelConfig(architecture=architecture, hidden=8, dense_size=8,
                                                                           word_dim=8, max_length=300), ClsDataConfig(), seed=1)
    classifier.fit(ClsCorpus(examples), None, TrainConfig(max_epoch=1, batch_size=8, early_stop=False, seed=1))
    texts = [e.text for e in examples]
    sizes: list[int] = []
    decode = classifier._decode
    monkeypatch.setattr(classifier, "_decode", lambda data, indices, member: sizes.append(len(indices)) or decode(data, indices, member))
    cut, cut_sizes, whole, whole_sizes = _cut_then_whole(monkeypatch, classifier_module,
                                                         lambda: classifier.predict_logits(texts, batch_size=256), sizes)
    assert whole_sizes == [60] and len(cut_sizes) > 1 and sum(cut_sizes) == 60
    np.testing.assert_allclose(cut, whole, atol=1e-5)
