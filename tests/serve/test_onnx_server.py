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
from textorch.tagging.training import train_sequence_labeler  # noqa: E402
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
    train_sequence_labeler(str(write_tiny_conll(root / "tiny.conll")), output=root / "ner", **FAST)
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
    monkeypatch.setattr(runner, "serve_forever", lambda app, config, log_level="info", sock=None: started.update(app=app))
    assert main(["serve", "--port", "0", "--model", str(model_dirs["sentiment"]), "--engine", "onnx", "--quantized", "--threads", "1"]) == 0
    served = started["app"].state.models["sentiment"]
    assert served.engine == "onnx" and served.predictor.runner.model_file.name == "model.int8.onnx"
    capsys.readouterr()
    assert main(["serve", "--port", "0", "--model", str(model_dirs["sentiment"]), "--quantized"]) == 2
    assert "need --engine onnx" in capsys.readouterr().err


def test_serve_runs_models_on_the_auto_engine_by_default(model_dirs: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.classification.classifier import TextClassifier
    from textorch.onnx.engine import AutoRunner, OnnxClassifierRunner
    from textorch.serve import runner

    started = {}
    monkeypatch.setattr(runner, "serve_forever", lambda app, config, log_level="info", sock=None: started.update(app=app))
    assert main(["serve", "--port", "0", "--model", str(model_dirs["ner"]), "--model", str(model_dirs["sentiment"]),
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


@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_a_damaged_export_is_made_again_when_the_server_loads(tmp_path: Path, damage: str) -> None:
    """``serve --engine onnx`` over a ``MODEL/onnx/model.onnx`` cut short (a copy interrupted, a
    full disk): exported again from the weights, as ``seq tag`` does, and served. Before, the
    server died in an ``InvalidProtobuf`` traceback."""
    from model_fixture import v1_model_dir

    model = v1_model_dir(tmp_path / "date")
    assert main(["export", "onnx", "--model", str(model)]) == 0
    graph = model / "onnx" / "model.onnx"
    with open(graph, "r+b") as handle:
        handle.truncate(graph.stat().st_size // 3 if damage == "truncated" else 0)
    served = load_models([str(model)], engine="onnx", threads=1)
    assert served["date"].engine == "onnx"
    import onnx

    onnx.checker.check_model(str(graph))  # the export was made again, whole
    from conftest import write_tiny_grobid
    from textorch.data.readers import read_labelled

    sequences = read_labelled(write_tiny_grobid(tmp_path / "dates.grobid", 6)).sequences
    reference = SequenceLabeler.load(model).predict(sequences)
    assert [p.labels for p in served["date"].predictor.predict(sequences)] == [p.labels for p in reference]


def test_a_damaged_export_in_a_named_directory_is_refused_in_one_line(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """An export the user names (``--onnx-dir``) is not textorch's to replace: one line naming the file."""
    from model_fixture import v1_model_dir

    model = v1_model_dir(tmp_path / "date")
    export = tmp_path / "export"
    assert main(["export", "onnx", "--model", str(model), "--output", str(export)]) == 0
    for graph in export.glob("*.onnx"):
        graph.write_bytes(graph.read_bytes()[:500])
    text = tmp_path / "in.txt"
    text.write_text("June 12 , 2005\n")
    capsys.readouterr()
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(tmp_path / "out.json"),
                 "--engine", "onnx", "--onnx-dir", str(export)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("textorch: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith(f"textorch: error: {export / 'model.onnx'}: ONNX Runtime cannot load it (InvalidProtobuf"), err
    assert errors[0].endswith("; export the model again"), err
