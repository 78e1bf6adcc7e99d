"""ONNX export of text classifiers: every architecture, ensembles, multi-label, pre-trained vectors and
bert give the PyTorch labels and probabilities within 1e-4, and their int8 graphs the probabilities
within :data:`INT8_ATOL` (labels equal except near-ties); ``cls classify/eval --engine onnx``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from tiny_classification import FILLER, KEYWORDS, TINY, tiny_examples, write_tiny_csv, write_tiny_vectors  # noqa: E402
from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier  # noqa: E402
from textorch.tagging.config import TrainConfig  # noqa: E402
from textorch.data.cls_readers import ClsCorpus, ClsExample  # noqa: E402
from textorch.data.tokenize import tokenize  # noqa: E402
from textorch.models.classifiers import CLS_ARCHITECTURES  # noqa: E402
from textorch.onnx.classifier import export_classifier  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402

# Texts of 0 to 30 tokens: long ones go through every pooling level, and "" is one <unk> token.
_RNG = random.Random(3)
TEXTS = [" ".join(_RNG.choice(FILLER + ["good", "bad", "table", "alpha", "beta"]) for _ in range(_RNG.randint(1, 30)))
         for _ in range(30)] + ["", "unseen words only !"]


def _train(corpus: ClsCorpus, architecture: str, folds: int = 1, embeddings=None, **model: object) -> TextClassifier:
    config = ClsModelConfig(architecture=architecture, fold_count=folds, **{**TINY, **model})
    classifier = TextClassifier.build(corpus, config, ClsDataConfig(), embeddings, seed=1)
    classifier.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    return classifier


INT8_ATOL = 0.01
"""How far int8 probabilities may lie from PyTorch's. Dynamic quantisation rounds each weight
matrix to 127 levels (7 bits, see `textorch.onnx.files`) and activations to 255 at run time: a small relative error on the logits, which
moves probabilities by less than this; weights or outputs that are garbled, misordered or
zero move them by far more."""


def assert_int8_agrees(classifier: TextClassifier, expected: list, got: list) -> None:
    """Probabilities within :data:`INT8_ATOL` of PyTorch's, and the same labels wherever that error
    cannot change them: a single-label class whose lead over the runner-up exceeds twice the
    tolerance, a multi-label class whose probability lies further than it from its threshold.
    Only near-ties may be decided otherwise, as rounding may tip them either way."""
    assert len(got) == len(expected)
    for want, have in zip(expected, got):
        for c in classifier.classes:
            assert have.scores[c] == pytest.approx(want.scores[c], abs=INT8_ATOL), (c, want.scores, have.scores)
        if classifier.multi_label:
            for c, threshold in zip(classifier.classes, classifier.thresholds):
                if abs(want.scores[c] - threshold) > INT8_ATOL:
                    assert (c in have.labels) == (c in want.labels), (c, want, have)
        else:
            first, second = sorted(want.scores.values())[-2:][::-1]
            if first - second > 2 * INT8_ATOL:
                assert have.labels == want.labels, (want, have)


def _assert_onnx_equals_torch(classifier: TextClassifier, directory: Path, quantize: bool = False) -> float:
    """Labels equal and probabilities within 1e-4 (batches of 7: mixed lengths); returns the largest
    difference. With ``quantize`` the int8 graph is run too and held to :func:`assert_int8_agrees`."""
    expected = classifier.predict(TEXTS, batch_size=7)
    export_classifier(classifier, directory, quantize=quantize)
    attach_onnx(classifier, directory.parent, directory)
    got = classifier.predict(TEXTS, batch_size=7)
    classifier.runner = None
    assert [p.labels for p in got] == [p.labels for p in expected]
    difference = max(abs(a.scores[c] - b.scores[c]) for a, b in zip(expected, got) for c in classifier.classes)
    assert difference < 1e-4
    if quantize:
        attach_onnx(classifier, directory.parent, directory, quantized=True)
        assert classifier.runner.model_file.name == "model.int8.onnx"
        assert_int8_agrees(classifier, expected, classifier.predict(TEXTS, batch_size=7))
        classifier.runner = None
    return difference


@pytest.mark.parametrize("architecture", [a for a in CLS_ARCHITECTURES if a != "bert"])
def test_every_architecture_onnx_equals_pytorch(architecture: str, tmp_path: Path) -> None:
    classifier = _train(ClsCorpus(tiny_examples()), architecture)
    _assert_onnx_equals_torch(classifier, tmp_path / "onnx", quantize=True)
    description = json.loads((tmp_path / "onnx" / "onnx-model.json").read_text())
    assert [i["name"] for i in description["inputs"]] == ["token_ids", "mask"]
    assert [o["name"] for o in description["outputs"]] == ["logits", "probabilities"]
    assert description["decision"] == "argmax" and description["members"] == 1


def _multi_label_corpus() -> ClsCorpus:
    rng = random.Random(5)
    examples = []
    for i in range(36):
        labels = tuple(c for c, on in (("alpha", i % 2 == 0), ("beta", i % 3 == 0)) if on)
        words = [rng.choice(FILLER) for _ in range(3)] + list(labels)
        rng.shuffle(words)
        examples.append(ClsExample(" ".join(words), labels, i + 1))
    return ClsCorpus(examples, multi_label=True, classes=["alpha", "beta"])


def test_multi_label_ensemble_with_thresholds(tmp_path: Path) -> None:
    classifier = _train(_multi_label_corpus(), "cnn", folds=2)
    classifier.thresholds = np.array([0.3, 0.6])  # labels depend on them: both must travel
    _assert_onnx_equals_torch(classifier, tmp_path / "onnx", quantize=True)
    description = json.loads((tmp_path / "onnx" / "onnx-model.json").read_text())
    assert description["multi_label"] and description["members"] == 2
    assert description["thresholds"] == [0.3, 0.6] and len(description["member_thresholds"]) == 2


def test_single_label_ensemble_and_pretrained_vectors(tmp_path: Path) -> None:
    from textorch.embeddings import open_embeddings

    vectors = write_tiny_vectors(tmp_path / "tiny.vec.txt")
    embeddings = open_embeddings(str(vectors), cache_dir=tmp_path / "cache")
    classifier = _train(ClsCorpus(tiny_examples()), "gru_lstm", folds=3, embeddings=embeddings)
    _assert_onnx_equals_torch(classifier, tmp_path / "onnx", quantize=True)
    description = json.loads((tmp_path / "onnx" / "onnx-model.json").read_text())
    assert [i["name"] for i in description["inputs"]] == ["word_vectors", "mask"]
    assert description["embeddings"]["dim"] == 6 and description["members"] == 3


def test_another_program_classifies_from_the_export_directory_alone(tmp_path: Path) -> None:
    """vocab.json + the documented tokenisation + ONNX Runtime give ``predict``'s probabilities."""
    import onnxruntime

    classifier = _train(ClsCorpus(tiny_examples()), "gru", max_length=12)
    out = export_classifier(classifier, tmp_path / "onnx")
    description = json.loads((out / "onnx-model.json").read_text())
    vocab = json.loads((out / "vocab.json").read_text())
    index = {w: i for i, w in enumerate(vocab["words"])}
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    classes = json.loads((out / "labels.json").read_text())
    for text, prediction in zip(TEXTS, classifier.predict(TEXTS)):
        tokens = tokenize(text)[0][: description["tokenizer"]["max_tokens"]] or [description["tokenizer"]["empty_text"]]
        ids = np.array([[index.get(t, vocab["unknown_id"]) for t in tokens]], dtype=np.int64)
        probabilities = session.run(["probabilities"], {"token_ids": ids, "mask": np.ones_like(ids)})[0][0]
        np.testing.assert_allclose(probabilities, [prediction.scores[c] for c in classes], atol=1e-5)
        assert classes[int(probabilities.argmax())] == prediction.labels[0]


def test_bert_classifier_ensemble_onnx_and_int8(tmp_path: Path) -> None:
    import onnxruntime
    from tiny_transformer import write_tiny_bert
    from tokenizers import Tokenizer

    words = sorted({w for ws in KEYWORDS.values() for w in ws} | set(FILLER))
    bert = write_tiny_bert(tmp_path / "bert", words, hidden=16)
    classifier = _train(ClsCorpus(tiny_examples(24)), "bert", folds=2, transformer=str(bert), max_length=12)
    _assert_onnx_equals_torch(classifier, tmp_path / "onnx", quantize=True)
    out = tmp_path / "onnx"
    assert json.loads((out / "onnx-model.json").read_text())["tokenizer"]["file"] == "tokenizer.json"
    # tokenizer.json alone reproduces textorch's pieces, special tokens and truncation included
    tokenizer = Tokenizer.from_file(str(out / "tokenizer.json"))
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    long_text = TEXTS[0] + " " + TEXTS[1]
    ids = np.array([tokenizer.encode(long_text).ids], dtype=np.int64)
    assert ids.shape[1] == 12
    probabilities = session.run(["probabilities"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
    expected = classifier.predict([long_text])[0].scores
    np.testing.assert_allclose(probabilities, [expected[c] for c in classifier.classes], atol=1e-5)
    attach_onnx(classifier, tmp_path, out, quantized=True)
    assert len(classifier.predict(TEXTS)) == len(TEXTS)


def test_cli_classify_and_eval_with_the_onnx_engine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from textorch.cli.main import main

    data = write_tiny_csv(tmp_path / "tiny.csv")
    model = tmp_path / "model"
    assert main(["cls", "train", "--train", str(data), "--output", str(model), "--architecture", "gru_simple",
                 "--hidden", "8", "--dense-size", "8", "--word-dim", "8", "--max-epoch", "2", "--early-stop", "false"]) == 0
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[:-2]) + "\n", encoding="utf-8")
    documents = {}
    for engine in (["--engine", "torch"], ["--engine", "onnx"], ["--engine", "onnx", "--quantized"], ["--engine", "auto"], []):
        out = tmp_path / f"out{len(documents)}.json"
        assert main(["cls", "classify", "--model", str(model), "--input", str(texts), "--output", str(out), *engine]) == 0
        documents[" ".join(engine)] = json.loads(out.read_text())["classifications"]
    torch_records = documents["--engine torch"]
    for other in ("--engine onnx", "--engine auto", ""):  # "": no --engine, the default (auto)
        assert [r["labels"] for r in documents[other]] == [r["labels"] for r in torch_records]
        for a, b in zip(torch_records, documents[other]):
            assert b["scores"] == pytest.approx(a["scores"], abs=1e-4)
    assert len(documents["--engine onnx --quantized"]) == len(torch_records)
    from textorch.classification.classifier import ClsPrediction, TextClassifier

    predictions = {engine: [ClsPrediction(r["labels"], r["scores"]) for r in records] for engine, records in documents.items()}
    assert_int8_agrees(TextClassifier.load(model), predictions["--engine torch"], predictions["--engine onnx --quantized"])
    from textorch.onnx.engine import OnnxClassifierRunner

    assert isinstance(TextClassifier.load(model, engine="auto").runner, OnnxClassifierRunner)  # the API's --engine
    assert isinstance(TextClassifier.load(model).runner, OnnxClassifierRunner)  # auto is the default
    assert TextClassifier.load(model, engine="torch").runner is None
    assert (model / "onnx" / "model.int8.onnx").is_file()  # --quantized re-exported with int8
    metrics = {}
    for engine in ("torch", "onnx"):
        assert main(["cls", "eval", "--model", str(model), "--test", str(data), "--engine", engine,
                     "--metrics-json", str(tmp_path / f"{engine}.json")]) == 0
        metrics[engine] = json.loads((tmp_path / f"{engine}.json").read_text())
    assert metrics["onnx"] == metrics["torch"]
    capsys.readouterr()
    assert main(["cls", "classify", "--model", str(model), "--input", str(texts), "--quantized"]) == 2
    assert "--quantized and --onnx-dir need --engine onnx" in capsys.readouterr().err
    assert main(["export", "onnx", "--model", str(model), "--output", str(model)]) == 2
    assert "not an ONNX export" in capsys.readouterr().err


def test_stale_export_is_redone_and_read_only_models_export_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.errors import ModelFormatError
    from textorch.onnx import engine

    import shutil

    corpus = ClsCorpus(tiny_examples())
    model = _train(corpus, "gru_simple").save(tmp_path / "model")
    old_export = tmp_path / "exported"
    # Loaded in PyTorch alone (the default, auto, would export into model/onnx itself): the runner is attached here.
    assert attach_onnx(TextClassifier.load(model, engine="torch"), model, old_export) == old_export
    _train(corpus, "gru_simple", hidden=6).save(model)  # new weights (saving removes model/onnx)
    reloaded = TextClassifier.load(model, engine="torch")
    expected = reloaded.predict(TEXTS)
    with pytest.raises(ModelFormatError, match="other weights"):
        attach_onnx(reloaded, model, old_export)  # an explicit directory is never replaced
    shutil.copytree(old_export, model / "onnx")  # an old export restored where the default one goes
    assert attach_onnx(reloaded, model) == model / "onnx"  # is exported again
    for got, want in zip(reloaded.predict(TEXTS), expected):
        assert got.scores == pytest.approx(want.scores, abs=1e-4)

    original = engine.export_model

    def refuse_model_dir(predictor, output, quantize=False, source_dir=None):
        if Path(output).is_relative_to(model):
            raise PermissionError(13, "Permission denied", str(output))
        return original(predictor, output, quantize, source_dir)

    monkeypatch.setattr(engine, "export_model", refuse_model_dir)
    directory = attach_onnx(TextClassifier.load(model, engine="torch"), model, quantized=True)
    assert not directory.is_relative_to(model) and (directory / "model.int8.onnx").is_file()
