"""``train_text_classifier`` and ``classify``: the Python doors run what the ``cls`` commands run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
from textorch.classification.training import train_classifier, train_text_classifier
from textorch.data.cls_readers import read_cls
from textorch.errors import ConfigError
from textorch.train.config import TrainConfig
from tiny_classification import TINY, write_tiny_csv

OPTIONS = dict(TINY, max_epoch=2, seed=3)


def test_train_from_a_file_or_a_corpus_is_the_commands_training(tmp_path: Path) -> None:
    path = write_tiny_csv(tmp_path / "tiny.csv")
    texts = [e.text for e in read_cls(str(path)).examples]
    by_file = train_text_classifier(path, output=tmp_path / "m", **OPTIONS)
    by_corpus = train_text_classifier(read_cls(str(path)), **OPTIONS)
    model = {k: v for k, v in OPTIONS.items() if k in TINY}
    by_command = train_classifier(str(path), None, ClsModelConfig(**model), TrainConfig(max_epoch=2, seed=3),
                                  ClsDataConfig()).classifier
    expected = by_command.predict_logits(texts)
    np.testing.assert_array_equal(by_file.predict_logits(texts), expected)
    np.testing.assert_array_equal(by_corpus.predict_logits(texts), expected)
    np.testing.assert_array_equal(TextClassifier.load(tmp_path / "m", engine="torch").predict_logits(texts), expected)


def test_classify_answers_the_servers_document(tmp_path: Path) -> None:
    classifier = train_text_classifier(write_tiny_csv(tmp_path / "tiny.csv"), **OPTIONS)
    document = classifier.classify(["a good paper .", "this was awful ."], model_name="tiny")
    assert document["model"] == "tiny" and document["classes"] == classifier.classes
    records = document["classifications"]
    assert [r["text"] for r in records] == ["a good paper .", "this was awful ."]
    assert all("line" not in r and set(r["scores"]) == set(classifier.classes) for r in records)


def test_unknown_training_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown training option"):
        train_text_classifier("unused.csv", hiden=8)
