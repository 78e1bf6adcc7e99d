"""TextClassifier contract over every architecture: train, save, load, same scores; ensembles; multi-label."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier, resolve_class_weights
from textorch.tagging.config import TrainConfig
from textorch.data.cls_readers import ClsCorpus, ClsExample, read_cls
from textorch.errors import ConfigError, DataError
from textorch.models.classifiers import CLS_ARCHITECTURES
from tiny_classification import FILLER, KEYWORDS, TINY, _train, tiny_examples, write_tiny_vectors

@pytest.mark.parametrize("architecture", [a for a in CLS_ARCHITECTURES if a != "bert"])
def test_every_architecture_trains_saves_and_reloads_identically(architecture: str, tmp_path: Path) -> None:
    corpus = ClsCorpus(tiny_examples())
    classifier, reports = _train(corpus, architecture)
    history = reports[0].training.history
    assert history[-1].loss < history[0].loss
    texts = [e.text for e in corpus.examples]
    logits = classifier.predict_logits(texts)
    scores = classifier.evaluate(corpus)
    target = classifier.save(tmp_path / "model")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
    config = json.loads((target / "config.json").read_text())
    assert config["builder"] == "text_classifier.v1" and config["model"]["architecture"] == architecture
    loaded = TextClassifier.load(target, engine="torch")  # the weights as saved, through the same network: bit for bit
    np.testing.assert_array_equal(loaded.predict_logits(texts), logits)
    assert loaded.evaluate(corpus) == scores
    assert loaded.classes == ["negative", "neutral", "positive"]


def test_bert_trains_saves_and_reloads_identically(tmp_path: Path) -> None:
    from tiny_transformer import write_tiny_bert

    words = sorted({w for ws in KEYWORDS.values() for w in ws} | set(FILLER))
    bert = write_tiny_bert(tmp_path / "bert", words, hidden=16)
    corpus = ClsCorpus(tiny_examples(24))
    classifier, reports = _train(corpus, "bert", epochs=2, transformer=str(bert))
    assert len(reports[0].training.history) == 2
    texts = [e.text for e in corpus.examples]
    logits = classifier.predict_logits(texts)
    target = classifier.save(tmp_path / "model")
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert files[:6] == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors",
                         "transformer/config.json"] and files[-1] == "vocab.json"
    assert any(f.startswith("transformer/tokenizer") for f in files)
    assert json.loads((target / "config.json").read_text())["builder"] == "transformer_classifier.v1"
    loaded = TextClassifier.load(target)
    np.testing.assert_array_equal(loaded.predict_logits(texts), logits)
    assert loaded.evaluate(corpus) == classifier.evaluate(corpus)


def test_bert_needs_a_transformer() -> None:
    with pytest.raises(ConfigError, match="--transformer"):
        TextClassifier.build(ClsCorpus(tiny_examples(6)), ClsModelConfig(architecture="bert"), ClsDataConfig())


def test_gru_learns_the_keywords() -> None:
    corpus = ClsCorpus(tiny_examples(60, seed=3))
    classifier, _ = _train(corpus, "gru", epochs=25, lr=0.02, hidden=16, dense_size=16, word_dim=16)
    held_out = ClsCorpus(tiny_examples(30, seed=4))
    assert classifier.evaluate(held_out)["accuracy"] >= 0.9


def test_scores_do_not_depend_on_batch_composition() -> None:
    corpus = ClsCorpus(tiny_examples())
    for architecture in ("cnn", "dpcnn", "gru_lstm"):
        classifier, _ = _train(corpus, architecture, epochs=1)
        texts = [e.text for e in corpus.examples]
        np.testing.assert_allclose(classifier.predict_logits(texts, batch_size=1), classifier.predict_logits(texts, batch_size=64), atol=1e-5)


def test_counts_of_process_shares_add_up_to_the_single_process_counts() -> None:
    from textorch.train.dist import DistContext

    corpus = ClsCorpus(tiny_examples(30))
    classifier, _ = _train(corpus, "gru_simple", epochs=1)
    data = classifier.text_encoder.encode([e.text for e in corpus.examples], classifier.targets(corpus))
    whole = classifier.count_encoded(data, batch_size=4)
    # Without a process group each context counts only its own share of the batches, which is
    # what every rank does before the all-reduce; the shares must partition the data.
    shares = [classifier.count_encoded(data, ctx=DistContext(rank, rank, 3), batch_size=4) for rank in range(3)]
    assert [s.n_examples for s in shares] == [12, 10, 8]  # 8 batches of 4 (last of 2), dealt round-robin
    summed = shares[0].to_tensor() + shares[1].to_tensor() + shares[2].to_tensor()
    assert type(whole).from_tensor(summed, classifier.classes).scores() == whole.scores()


def test_n_fold_ensemble_is_one_model_directory(tmp_path: Path) -> None:
    corpus = ClsCorpus(tiny_examples())
    classifier, reports = _train(corpus, "gru_simple", epochs=8, folds=3, lr=0.05, early_stop=True, hidden=16, word_dim=16)
    assert [r.n_valid for r in reports] == [12, 12, 12] and [r.n_train for r in reports] == [24, 24, 24]
    assert all(0.0 <= r.valid_scores["macro"]["f1"] <= 1.0 for r in reports)
    # every member learnt the keywords from its 24 texts: at chance, macro F1 is near 1/3
    assert all(r.valid_scores["macro"]["f1"] >= 0.6 for r in reports), [r.valid_scores for r in reports]
    texts = [e.text for e in corpus.examples]
    batch = classifier.text_encoder.encode(texts).batch(list(range(len(texts))))
    with torch.no_grad():
        members = torch.stack([classifier.network(batch, member=i) for i in range(3)]).double()
    geometric = torch.softmax(torch.log_softmax(members, dim=-1).mean(dim=0), dim=-1)
    predicted = np.array([[p.scores[c] for c in classifier.classes] for p in classifier.predict(texts)])
    np.testing.assert_allclose(predicted, geometric.numpy(), atol=1e-6)
    target = classifier.save(tmp_path / "ensemble")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
    loaded = TextClassifier.load(target, engine="torch")  # bit for bit: the same network
    assert len(loaded.network.members) == 3
    np.testing.assert_array_equal(loaded.predict_logits(texts), classifier.predict_logits(texts))
    assert loaded.evaluate(corpus, member=2) == classifier.evaluate(corpus, member=2)


def test_multi_label_thresholds_are_tuned_and_saved(tmp_path: Path) -> None:
    rng = random.Random(5)
    examples = []
    for i in range(48):
        labels = tuple(c for c, on in (("alpha", i % 2 == 0), ("beta", i % 3 == 0)) if on)
        words = [rng.choice(FILLER) for _ in range(3)] + [lab for lab in labels]
        rng.shuffle(words)
        examples.append(ClsExample(" ".join(words), labels, i + 1))
    train = ClsCorpus(examples[:36], multi_label=True, classes=["alpha", "beta"])
    valid = ClsCorpus(examples[36:], multi_label=True, classes=["alpha", "beta"])
    config = ClsModelConfig(architecture="gru_simple", **TINY)
    classifier = TextClassifier.build(train, config, ClsDataConfig(), seed=1)
    reports = classifier.fit(train, valid, TrainConfig(max_epoch=8, batch_size=8, learning_rate=0.02, seed=1))
    assert "roc_auc" in reports[0].valid_scores
    assert all(0.05 <= t <= 0.95 for t in classifier.thresholds)
    predictions = classifier.predict([e.text for e in valid.examples])
    for p in predictions:
        assert p.labels == [c for c, t in zip(classifier.classes, classifier.thresholds) if p.scores[c] >= t]
    loaded = TextClassifier.load(classifier.save(tmp_path / "m"), engine="torch")  # bit for bit: the same network
    np.testing.assert_array_equal(loaded.thresholds, classifier.thresholds)
    assert loaded.evaluate(valid) == classifier.evaluate(valid)


def test_pretrained_vectors_are_used_and_checked(tmp_path: Path) -> None:
    from textorch.embeddings import open_embeddings

    vectors = write_tiny_vectors(tmp_path / "tiny.vec.txt")
    embeddings = open_embeddings(str(vectors), cache_dir=tmp_path / "cache")
    corpus = ClsCorpus(tiny_examples())
    classifier = TextClassifier.build(corpus, ClsModelConfig(architecture="gru", **TINY), ClsDataConfig(embeddings=str(vectors)), embeddings, seed=1)
    classifier.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, early_stop=False))
    assert classifier.text_encoder.word_table.coverage() == 1.0
    target = classifier.save(tmp_path / "m")
    assert json.loads((target / "config.json").read_text())["embeddings"]["dim"] == 6
    # The same LMDB cache cannot be opened twice in one process: hand the open store over.
    loaded = TextClassifier.load(target, embeddings=embeddings, engine="torch")  # bit for bit: the same network
    texts = [e.text for e in corpus.examples]
    np.testing.assert_array_equal(loaded.predict_logits(texts), classifier.predict_logits(texts))


def test_class_weights() -> None:
    classes = ["n", "o", "p"]
    targets = np.array([1] * 8 + [2] * 3 + [0])
    balanced = resolve_class_weights(None, classes, False, targets)
    assert balanced.tolist() == pytest.approx([12 / 3, 12 / 24, 12 / 9])
    assert resolve_class_weights("none", classes, False, targets) is None
    assert resolve_class_weights("n=25, p=9", classes, False, targets).tolist() == [25.0, 1.0, 9.0]
    assert resolve_class_weights(None, classes, True, np.eye(3)[targets]) is None  # multi-label: none by default
    assert resolve_class_weights("balanced", classes, True, np.eye(3)[targets]).tolist() == pytest.approx([11.0, 4 / 8, 9 / 3])
    with pytest.raises(ConfigError, match="classes: n, o, p"):
        resolve_class_weights("x=2", classes, False, targets)


def test_unknown_label_at_evaluation_names_file_and_line(tmp_path: Path) -> None:
    classifier, _ = _train(ClsCorpus(tiny_examples(12)), "gru_simple", epochs=1)
    test = tmp_path / "test.csv"
    test.write_text("text,label\ngood .,positive\nsomething,surprise\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"test\.csv:3: unknown label 'surprise'; the model's classes are: negative, neutral, positive"):
        classifier.evaluate(read_cls(test))
