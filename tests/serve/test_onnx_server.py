"""``textorch serve --engine onnx``: models run by ONNX Runtime answer as the PyTorch Python API does."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import httpx
import pytest
import torch

pytest.importorskip("onnxruntime")

from conftest import write_tiny_conll  # noqa: E402
from test_server import SENTIMENT, _assert_same_answer, _train_classifier  # noqa: E402
from textorch import SequenceLabeler  # noqa: E402
from textorch.cli.main import main  # noqa: E402
from textorch.serve.app import create_app  # noqa: E402
from textorch.serve.config import ServerConfig  # noqa: E402
from textorch.serve.models import load_models  # noqa: E402
from textorch.serve.runner import BackgroundServer  # noqa: E402

FAST = dict(max_epoch=6, batch_size=8, learning_rate=0.01, seed=1, early_stop=False,
            char_dim=8, char_hidden=8, word_hidden=16, dropout=0.1)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("served-onnx")
    SequenceLabeler.train(str(write_tiny_conll(root / "tiny.conll")), output=root / "ner", **FAST)
    _train_classifier(root / "sentiment")
    torch.set_num_threads(before)
    return {"ner": root / "ner", "sentiment": root / "sentiment"}


@pytest.fixture(scope="module")
def onnx_server(model_dirs: dict[str, Path]) -> Iterator[str]:
    served = load_models([str(model_dirs["ner"]), str(model_dirs["sentiment"])], engine="onnx", threads=1)
    config = ServerConfig(port=0, batch_window_ms=5)
    with BackgroundServer(create_app(served, config), config) as running:
        yield running.url


def test_served_onnx_models_answer_as_the_pytorch_api(onnx_server: str, model_dirs: dict[str, Path]) -> None:
    with httpx.Client(base_url=onnx_server, timeout=30) as client:
        described = client.get("/models").json()["models"]
        assert {m["name"]: m["engine"] for m in described} == {"ner": "onnx", "sentiment": "onnx"}
        assert (model_dirs["ner"] / "onnx" / "model.onnx").is_file()  # exported on the fly, beside the model

        texts = ["Anna lives in Madrid .", "Peter and Mary lives in Rome .", ""]
        answer = client.post("/models/ner/tag", json={"texts": texts}).json()
        reference = SequenceLabeler.load(model_dirs["ner"]).tag(texts, model_name="ner")
        assert sum(len(t["entities"]) for t in reference["texts"]) >= 3  # a tagger that tags something
        _assert_same_answer(answer, reference)

        from textorch.classification.classifier import TextClassifier

        sentences = [text for text, _ in SENTIMENT[:6]] + ["nothing known here", ""]
        records = client.post("/models/sentiment/classify", json={"texts": sentences}).json()["classifications"]
        predictions = TextClassifier.load(model_dirs["sentiment"]).predict(sentences)
        assert [r["labels"] for r in records] == [p.labels for p in predictions]
        for record, prediction in zip(records, predictions):
            assert record["scores"] == pytest.approx(prediction.scores, abs=1e-4)


def test_serve_command_passes_the_engine_options(model_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    from textorch.serve import runner

    started = {}
    monkeypatch.setattr(runner, "serve_forever", lambda app, config, log_level="info": started.update(app=app))
    assert main(["serve", "--model", str(model_dirs["sentiment"]), "--engine", "onnx", "--quantized", "--threads", "1"]) == 0
    served = started["app"].state.models["sentiment"]
    assert served.engine == "onnx" and served.predictor.runner.model_file.name == "model.int8.onnx"
    capsys.readouterr()
    assert main(["serve", "--model", str(model_dirs["sentiment"]), "--quantized"]) == 2
    assert "need --engine onnx" in capsys.readouterr().err


def test_serve_runs_models_on_the_auto_engine_by_default(model_dirs: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.classification.classifier import TextClassifier
    from textorch.onnx.engine import AutoRunner, OnnxClassifierRunner
    from textorch.serve import runner

    started = {}
    monkeypatch.setattr(runner, "serve_forever", lambda app, config, log_level="info": started.update(app=app))
    assert main(["serve", "--model", str(model_dirs["ner"]), "--model", str(model_dirs["sentiment"]),
                 "--threads", "1", "--device", "cpu"]) == 0
    served = started["app"].state.models
    assert served["ner"].engine == "auto" and isinstance(served["ner"].predictor.runner, AutoRunner)
    assert served["sentiment"].engine == "auto"
    assert isinstance(served["sentiment"].predictor.runner, OnnxClassifierRunner)  # every call: faster at all sizes
    texts = ["Anna lives in Madrid .", "Peter and Mary lives in Rome ."]
    _assert_same_answer(served["ner"].predictor.tag(texts, model_name="ner"),
                        SequenceLabeler.load(model_dirs["ner"]).tag(texts, model_name="ner"))
    sentences = [text for text, _ in SENTIMENT[:6]]
    got = served["sentiment"].predictor.predict(sentences)
    expected = TextClassifier.load(model_dirs["sentiment"]).predict(sentences)
    assert [p.labels for p in got] == [p.labels for p in expected]
    for a, b in zip(got, expected):
        assert a.scores == pytest.approx(b.scores, abs=1e-4)
