"""The HTTP server on 127.0.0.1 with real requests: answers equal the Python API's, 4xx for bad input,
and concurrent requests gathered into batches."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from textorch.tagging.training import train_sequence_labeler
from textorch.cli.main import main
from textorch.errors import ConfigError
from textorch.serve.app import create_app
from textorch.serve.config import ServerConfig
from textorch.serve.models import load_models, parse_model_spec
from textorch.serve.runner import BackgroundServer

from conftest import REPO, write_tiny_conll, write_tiny_grobid

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, feature_dim=3, feature_output_dim=8, dropout=0.1)
FAST = dict(max_epoch=6, batch_size=8, learning_rate=0.01, seed=1, early_stop=False, **SMALL)
LIMIT = 16 * 1024
DATE = [["June", "june", "LINESTART", "INITCAP", "NOPUNCT"], ["12", "12", "LINEIN", "NOCAPS", "NOPUNCT"],
        ["2005", "2005", "LINEEND", "NOCAPS", "NOPUNCT"]]



@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("served")
    train_sequence_labeler(str(write_tiny_conll(root / "tiny.conll")), output=root / "ner", **FAST)
    # the date model only has to take features: its quality does not matter here
    train_sequence_labeler(str(write_tiny_grobid(root / "date.train", n=20)), architecture="BidLSTM_CRF_FEATURES",
                           output=root / "date-model", **{**FAST, "max_epoch": 2})
    _train_classifier(root / "sentiment")
    return {"ner": root / "ner", "date": root / "date-model", "sentiment": root / "sentiment"}


SENTIMENT = [("a good paper .", "positive"), ("this was great", "positive"), ("a bad method .", "negative"),
             ("it was awful", "negative"), ("the table .", "neutral"), ("we found a paper", "neutral")] * 4


def _train_classifier(directory: Path) -> None:
    from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
    from textorch.tagging.config import TrainConfig
    from textorch.data.cls_readers import ClsCorpus, ClsExample

    corpus = ClsCorpus([ClsExample(text, (label,), i + 1) for i, (text, label) in enumerate(SENTIMENT)])
    config = ClsModelConfig(architecture="gru", hidden=8, dense_size=8, word_dim=8, dropout=0.1)
    classifier = TextClassifier.build(corpus, config, ClsDataConfig(), seed=1)
    classifier.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    classifier.save(directory)


@pytest.fixture(scope="module")
def served(model_dirs: dict[str, Path]) -> dict:
    return load_models([str(model_dirs["ner"]), f"date={model_dirs['date']}", str(model_dirs["sentiment"])])


@pytest.fixture(scope="module")
def server(served: dict) -> Iterator[str]:
    config = ServerConfig(port=0, batch_window_ms=20, max_batch_size=64, max_request_bytes=LIMIT)
    with BackgroundServer(create_app(served, config), config) as running:
        yield running.url


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as http:
        yield http


def _without_times(document: dict) -> dict:
    """The answer minus what legitimately differs between two calls (date, runtime, score rounding)."""
    texts = [{**t, "entities": [{k: v for k, v in e.items() if k != "score"} for e in t["entities"]]}
             for t in document["texts"]]
    return {**{k: v for k, v in document.items() if k not in ("date", "runtime")}, "texts": texts}


def _assert_same_answer(served_answer: dict, api_answer: dict) -> None:
    assert _without_times(served_answer) == _without_times(api_answer)
    # a sequence batched with others may differ from itself alone in the last float bits
    for mine, theirs in zip(served_answer["texts"], api_answer["texts"]):
        for a, b in zip(mine["entities"], theirs["entities"]):
            assert a["score"] == pytest.approx(b["score"], abs=1e-4)


def test_tag_texts_equals_the_python_api(client: httpx.Client, served: dict) -> None:
    texts = ["Mary lives in Rome.", "", "Peter lives in Berlin ."]
    response = client.post("/models/ner/tag", json={"texts": texts})
    assert response.status_code == 200
    answer = response.json()
    _assert_same_answer(answer, served["ner"].predictor.tag(texts, model_name="ner"))
    assert [t["text"] for t in answer["texts"]] == texts
    assert any(e["class"] == "LOC" for e in answer["texts"][0]["entities"])
    assert answer["runtime"] >= 0 and answer["software"] == "textorch"


def test_tag_sequences_with_features_equals_the_python_api(client: httpx.Client, served: dict) -> None:
    response = client.post("/models/date/tag", json={"sequences": [DATE, DATE[:2]]})
    assert response.status_code == 200
    answer = response.json()
    _assert_same_answer(answer, served["date"].predictor.tag([DATE, DATE[:2]], model_name="date"))
    assert len(answer["texts"][0]["labels"]) == 3 and len(answer["texts"][1]["labels"]) == 2
    assert all(label.endswith(">") for label in answer["texts"][0]["labels"])  # GROBID's own labels


def test_models_health_and_openapi(client: httpx.Client) -> None:
    models = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert set(models) == {"ner", "date", "sentiment"}
    assert models["ner"]["labels"] == ["LOC", "PER"] and models["ner"]["architecture"] == "BidLSTM_CRF"
    assert models["date"]["n_features"] == 4 and models["date"]["uses_features"] is True
    # The default engine: ONNX Runtime for small calls, exported into the model directory on first use.
    assert {k: models["ner"][k] for k in ("kind", "device", "engine")} == {"kind": "tagger", "device": "cpu", "engine": "auto"}
    health = client.get("/health").json()
    assert models["sentiment"]["kind"] == "classifier" and models["sentiment"]["labels"] == ["negative", "neutral", "positive"]
    assert health["status"] == "ok" and health["models"] == ["ner", "date", "sentiment"]
    assert health["batching"]["window_ms"] == 20 and health["batching"]["max_batch_size"] == 64
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/models/{name}/tag", "/models/{name}/classify", "/models", "/health"} <= set(paths)


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"texts": "Mary lives in Rome"}, 422, "texts: Input should be a valid list"),
        ({"texts": [1, 2]}, 422, "texts.0: Input should be a valid string"),
        ({}, 422, "give exactly one of 'texts' or 'sequences'"),
        ({"texts": ["a"], "sequences": [["a"]]}, 422, "give exactly one of 'texts' or 'sequences'"),
        ({"text": ["a"]}, 422, "text: Extra inputs are not permitted"),
        ({"sequences": [[["Mary", "NNP"]]]}, 422, "sequences[0][0]: expected the token alone"),
        ({"sequences": "Mary"}, 422, "sequences: Input should be a valid list"),
        ([1, 2], 422, "body: Input should be a valid dictionary"),
    ],
)
def test_bad_payloads_get_4xx_with_a_message(client: httpx.Client, payload: object, status: int, message: str) -> None:
    response = client.post("/models/ner/tag", json=payload)
    assert response.status_code == status
    assert message in response.json()["detail"]


def test_features_checked_against_the_model(client: httpx.Client) -> None:
    response = client.post("/models/date/tag", json={"sequences": [["June", "12"]]})
    assert response.status_code == 422
    assert response.json()["detail"] == "sequences[0][0]: the model needs 4 features per token: send [token, feature, ...]"
    response = client.post("/models/date/tag", json={"sequences": [[DATE[0][:3]]]})
    assert response.json()["detail"] == "sequences[0][0]: expected the token and 4 features, found 2 features"


def test_malformed_json_and_wrong_content_type(client: httpx.Client) -> None:
    response = client.post("/models/ner/tag", content=b'{"texts": [', headers={"content-type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["detail"]
    response = client.post("/models/ner/tag", content=b'{"texts": ["a"]}', headers={"content-type": "text/plain"})
    assert response.status_code == 415 and "application/json" in response.json()["detail"]


def test_oversized_requests_get_413(client: httpx.Client) -> None:
    response = client.post("/models/ner/tag", json={"texts": ["Rome " * (LIMIT // 5)]})
    assert response.status_code == 413
    assert response.json()["detail"].endswith(f"over the limit of {LIMIT} bytes")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"texts": ["'
        for _ in range(LIMIT // 1000 + 1):
            yield b"x" * 1000
        yield b'"]}'

    response = client.post("/models/ner/tag", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    # just under the limit is served
    response = client.post("/models/ner/tag", json={"texts": ["Rome " * (LIMIT // 6)]})
    assert response.status_code == 200


def test_unknown_model_and_kind_get_404(client: httpx.Client) -> None:
    response = client.post("/models/nope/tag", json={"texts": ["a"]})
    assert response.status_code == 404
    assert response.json()["detail"] == "no tagging model named 'nope' (available: ner, date)"
    response = client.post("/models/ner/classify", json={"texts": ["a"]})
    assert response.status_code == 404
    assert response.json()["detail"] == "no classification model named 'ner' (available: sentiment)"
    assert client.post("/models/sentiment/tag", json={"texts": ["a"]}).status_code == 404


def test_classify_equals_the_python_api(client: httpx.Client, served: dict) -> None:
    texts = ["a great method .", "the paper was bad", ""]
    response = client.post("/models/sentiment/classify", json={"texts": texts})
    assert response.status_code == 200
    answer = response.json()
    assert answer["classes"] == ["negative", "neutral", "positive"] and answer["model"] == "sentiment"
    predictions = served["sentiment"].predictor.predict(texts)
    assert [r["text"] for r in answer["classifications"]] == texts
    for record, prediction in zip(answer["classifications"], predictions):
        assert record["labels"] == prediction.labels
        assert record["scores"] == pytest.approx(prediction.scores, abs=1e-5)
        assert sum(record["scores"].values()) == pytest.approx(1.0, abs=1e-4)
    response = client.post("/models/sentiment/classify", json={"texts": [["not", "a", "string"]]})
    assert response.status_code == 422 and "texts.0: Input should be a valid string" in response.json()["detail"]


def _hammer(url: str, n_clients: int, n_requests: int, texts: list[str]) -> list[tuple[int, dict]]:
    """``n_clients`` threads, each sending ``n_requests`` one-text requests; (index, answer) pairs."""
    answers: list[tuple[int, dict]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def run(worker: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            for j in range(n_requests):
                index = (worker * n_requests + j) % len(texts)
                response = http.post("/models/ner/tag", json={"texts": [texts[index]]})
                with lock:
                    if response.status_code == 200:
                        answers.append((index, response.json()))
                    else:
                        failures.append(f"{response.status_code} {response.text}")

    threads = [threading.Thread(target=run, args=(w,)) for w in range(n_clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures[:3]
    return answers


def test_concurrent_clients_are_answered_correctly_in_batches(server: str, served: dict) -> None:
    people, places = ["Mary", "John", "Anna", "Peter"], ["Rome", "Paris", "Berlin", "Madrid"]
    texts = [f"{p} lives in {q} ." + " Yes ." * (i % 3) for i, (p, q) in
             enumerate((p, q) for p in people for q in places)]
    expected = served["ner"].predictor.tag(texts, model_name="ner")["texts"]
    before = httpx.get(f"{server}/health").json()["batching"]
    answers = _hammer(server, n_clients=16, n_requests=10, texts=texts)
    assert len(answers) == 160
    for index, answer in answers:
        assert len(answer["texts"]) == 1
        _assert_same_answer(answer, {**answer, "texts": [expected[index]]})
    after = httpx.get(f"{server}/health").json()["batching"]
    assert after["requests"] - before["requests"] == 160
    assert after["batches"] - before["batches"] < 160  # some requests shared a forward pass
    assert after["max_requests_per_batch"] > 1


def test_batching_off_runs_one_request_per_batch(served: dict) -> None:
    config = ServerConfig(port=0, batch_window_ms=0)
    with BackgroundServer(create_app(served, config), config) as running:
        texts = ["Mary lives in Rome .", "John lives in Paris ."]
        assert len(_hammer(running.url, n_clients=4, n_requests=5, texts=texts)) == 20
        batching = httpx.get(f"{running.url}/health").json()["batching"]
    assert batching["window_ms"] == 0
    assert batching["batches"] == batching["requests"] == 20 and batching["max_requests_per_batch"] == 1


def test_model_specs(model_dirs: dict[str, Path]) -> None:
    assert parse_model_spec("/models/grobid-date-BidLSTM_CRF/") == ("grobid-date-BidLSTM_CRF", Path("/models/grobid-date-BidLSTM_CRF/"))
    assert parse_model_spec("date=/x/y") == ("date", Path("/x/y"))
    with pytest.raises(ConfigError, match="model name 'a b'"):
        parse_model_spec("a b=/x")
    with pytest.raises(ConfigError, match="two models named 'ner'"):
        load_models([str(model_dirs["ner"]), str(model_dirs["ner"])])


def test_serving_a_tagger_loads_the_compiled_crf_decoder_up_front(model_dirs: dict[str, Path],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the first request, which would otherwise pay for loading Numba."""
    from textorch.models import cpu_decoder

    monkeypatch.delenv(cpu_decoder.DISABLE_ENV, raising=False)
    cpu_decoder.compiled_decoder.cache_clear()
    load_models([str(model_dirs["sentiment"])])
    assert cpu_decoder.compiled_decoder.cache_info().currsize == 0  # a classifier has no CRF
    load_models([str(model_dirs["sentiment"]), str(model_dirs["ner"])])
    assert cpu_decoder.compiled_decoder.cache_info().currsize == 1 and cpu_decoder.compiled_decoder() is not None


def test_served_models_run_in_the_precision_asked_for(model_dirs: dict[str, Path]) -> None:
    served = load_models([str(model_dirs["ner"]), str(model_dirs["sentiment"])], precision="bf16")
    assert {name: (m.predictor.precision, m.describe()["precision"]) for name, m in served.items()} == {
        "ner": ("bf16", "bf16"), "sentiment": ("bf16", "bf16")}
    assert load_models([str(model_dirs["ner"])])["ner"].describe()["precision"] == "fp32"
    with pytest.raises(ConfigError, match="--precision bf16 needs --engine torch"):
        load_models([str(model_dirs["ner"])], engine="onnx", precision="bf16")


def test_serve_command_refuses_a_missing_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["serve", "--port", "0", "--model", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(["serve", "--port", "0", "--model", str(tmp_path), "--max-batch-size", "0"]) == 2


def test_serve_on_a_port_in_use_says_so_in_one_line_before_serving(model_dirs: dict[str, Path],
                                                                  capsys: pytest.CaptureFixture) -> None:
    """A port another server holds: one line naming it, exit 2, before the models are loaded
    and before anything says "serving". Before, the command loaded the models, said "serving
    ... on http://127.0.0.1:PORT", then uvicorn logged the error and the command exited with 3."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert main(["serve", "--port", str(port), "--model", str(model_dirs["ner"])]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("textorch: error: ")]
    assert errors == [f"textorch: error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in "
                      "use); is another server on that port?"], err
    assert "serving" not in err and "Traceback" not in err, err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_command_serves_over_http(model_dirs: dict[str, Path], served: dict) -> None:
    port = _free_port()
    command = [sys.executable, "-m", "textorch.cli.main", "serve", "--model", f"ner={model_dirs['ner']}",
               "--port", str(port), "--batch-window-ms", "2", "--threads", "1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stdout.read().decode()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not start within 60 s"
                time.sleep(0.2)
        texts = ["Anna lives in Madrid ."]
        answer = httpx.post(f"http://127.0.0.1:{port}/models/ner/tag", json={"texts": texts}, timeout=30).json()
        _assert_same_answer(answer, served["ner"].predictor.tag(texts, model_name="ner"))
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.returncode in (0, -15)
