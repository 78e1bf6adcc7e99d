"""ONNX export and the ONNX Runtime engine: same labels as PyTorch, scores within 1e-4."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from conftest import cli_tagged_rows, cli_trained_tagger, trained_once, viterbi_from_crf_json  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402
from textorch.onnx.export import PaddedBiRNN, export_labeler  # noqa: E402
from corpus_vectors import write_corpus_vectors  # noqa: E402

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)


def _vectors(tmp_path: Path, corpus) -> object:
    """Word vectors covering most training words, so word vectors are a real input."""
    return open_embeddings(str(write_corpus_vectors(tmp_path / "vectors.txt", corpus)), cache_dir=tmp_path / "cache")


_CACHE: dict[str, SequenceLabeler] = {}


def _trained(tmp_path: Path, data: Path, architecture: str) -> SequenceLabeler:
    """One briefly trained model per architecture (the tiny GROBID fixture is the same file every time)."""

    def train() -> SequenceLabeler:
        corpus = read_labelled(data)
        labeler = SequenceLabeler.build(corpus, ModelConfig(architecture=architecture, **SMALL), DataConfig(),
                                        embeddings=_vectors(tmp_path, corpus), seed=1)
        labeler.fit(corpus, None, TrainConfig(max_epoch=1, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
        return labeler

    return trained_once(_CACHE, architecture, train)


def _assert_same(torch_predictions, onnx_predictions) -> None:
    assert [p.labels for p in onnx_predictions] == [p.labels for p in torch_predictions]
    for a, b in zip(torch_predictions, onnx_predictions):
        np.testing.assert_allclose(b.scores, a.scores, atol=1e-4)


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidLSTM_CNN_CRF", "BidGRU_CRF", "BidLSTM",
                                          "BidLSTM_CRF_FEATURES_TEMPLATE"])
def test_onnx_engine_equals_pytorch(tmp_path: Path, tiny_grobid: Path, architecture: str) -> None:
    labeler = _trained(tmp_path, tiny_grobid, architecture)
    sequences = read_labelled(tiny_grobid).sequences
    expected = labeler.predict(sequences, batch_size=7)  # mixed lengths within batches
    export_labeler(labeler, tmp_path / "onnx")
    attach_onnx(labeler, tmp_path, tmp_path / "onnx")
    got = labeler.predict(sequences, batch_size=7)
    _assert_same(expected, got)
    _assert_same(expected[:6], [labeler.predict([s], batch_size=1)[0] for s in sequences[:6]])  # one-call stream
    for batch_size in (1, 7):  # labels only
        bare = labeler.predict(sequences, batch_size=batch_size, with_scores=False)
        assert [p.labels for p in bare] == [p.labels for p in expected] and all(p.scores is None for p in bare)
    assert labeler.evaluate(tiny_grobid)["f1"] == pytest.approx(_f1_torch(labeler, tiny_grobid))


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF_FEATURES_TEMPLATE", "BidGRU_CRF"])
def test_the_torch_export_based_exporter_writes_graphs_that_equal_pytorch(tmp_path: Path, tiny_grobid: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         architecture: str) -> None:
    """The exporter PyTorch keeps (the default while it has the TorchScript one, see
    textorch.onnx.exporter) writes the recurrent taggers right: the day it takes over, nothing changes."""
    from textorch.onnx import exporter

    def refused(*args: object) -> None:
        raise AssertionError("the TorchScript exporter was used")

    monkeypatch.setenv(exporter.EXPORTER_VARIABLE, "torch.export")
    monkeypatch.setattr(exporter, "write_legacy_graph", refused)
    labeler = _trained(tmp_path, tiny_grobid, architecture)
    sequences = read_labelled(tiny_grobid).sequences
    expected = labeler.predict(sequences, batch_size=7)
    export_labeler(labeler, tmp_path / "onnx")
    attach_onnx(labeler, tmp_path, tmp_path / "onnx")
    _assert_same(expected, labeler.predict(sequences, batch_size=7))


@pytest.mark.parametrize("architecture,operator", [("BidLSTM_CRF", "LSTM"), ("BidGRU_CRF", "GRU")])
def test_each_bidirectional_rnn_is_one_native_node(tmp_path: Path, tiny_grobid: Path, architecture: str,
                                                   operator: str) -> None:
    """Each bidirectional RNN is one ONNX node reading the lengths (``sequence_lens``), not two
    directions with gathers around them: that graph spent a one-sentence call on shape nodes."""
    import onnx

    labeler = _trained(tmp_path, tiny_grobid, architecture)
    graph = onnx.load(str(export_labeler(labeler, tmp_path / "onnx") / "model.onnx")).graph
    rnns = [node for node in graph.node if node.op_type in ("LSTM", "GRU")]
    expected = [operator, "LSTM"] if architecture.startswith("BidGRU") else ["LSTM", "LSTM"]  # word RNN, char BiLSTM
    assert sorted(node.op_type for node in rnns) == sorted(expected)
    for node in rnns:
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attributes["direction"] == b"bidirectional"
        assert len(node.input) >= 5 and node.input[4]  # sequence_lens is given
    assert not [node for node in graph.node if node.op_type == "GatherElements"]


def _f1_torch(labeler: SequenceLabeler, data: Path) -> float:
    runner, labeler.runner = labeler.runner, None
    try:
        return labeler.evaluate(data)["f1"]
    finally:
        labeler.runner = runner


def test_export_json_files_match_model(tmp_path: Path, tiny_grobid: Path) -> None:
    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF_FEATURES")
    out = export_labeler(labeler, tmp_path / "export", quantize=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "char-encoder.onnx", "crf.json", "labels.json", "model-char-vectors.int8.onnx", "model-char-vectors.onnx",
        "model.int8.onnx", "model.onnx", "onnx-model.json", "vocab.json"]
    crf = json.loads((out / "crf.json").read_text())
    model_crf = labeler.model.head.crf
    np.testing.assert_allclose(crf["transitions"], model_crf.transitions.detach().numpy(), rtol=0, atol=1e-7)
    np.testing.assert_allclose(crf["start"], model_crf.start_transitions.detach().numpy(), rtol=0, atol=1e-7)
    np.testing.assert_allclose(crf["end"], model_crf.end_transitions.detach().numpy(), rtol=0, atol=1e-7)
    assert json.loads((out / "labels.json").read_text()) == labeler.encoder.labels.items
    vocab = json.loads((out / "vocab.json").read_text())
    assert vocab["chars"] == labeler.encoder.chars.items
    assert vocab["features"] == [v.items for v in labeler.encoder.features]
    assert vocab["feature_columns"] == labeler.encoder.feature_columns
    description = json.loads((out / "onnx-model.json").read_text())
    assert [i["name"] for i in description["inputs"]] == ["word_vectors", "char_ids", "feature_ids", "mask"]
    assert description["decoder"] == "crf"
    assert description["char_encoder"] == {"model_file": "char-encoder.onnx", "network_file": "model-char-vectors.onnx",
                                           "input": "char_rows", "output": "char_vectors",
                                           "quantized_network_file": "model-char-vectors.int8.onnx"}
    assert description["int8_revision"] == 2


def _graph_inputs(labeler: SequenceLabeler, sequences: list) -> dict[str, np.ndarray]:
    """``model.onnx``'s inputs for ``sequences`` as one batch (word vectors, characters, features)."""
    batch = labeler.encode(sequences).batch(list(range(len(sequences))))
    return {"word_vectors": batch.word_vectors.numpy(), "char_ids": batch.char_ids.numpy(),
            "feature_ids": batch.feature_ids.numpy(), "mask": batch.mask.long().numpy()}


def test_int8_graphs_run_their_lstms_in_int8(tmp_path: Path, tiny_grobid: Path) -> None:
    """The exporter writes an LSTM's weights as constant nodes, which the quantiser skips unless
    they are made initializers first: then the network's LSTM is quantised (one scale per weight
    row) in both int8 graphs, while ``model.int8.onnx`` keeps the character encoder's LSTM in
    float, as the split route runs it; the int8 emissions stay close to the float ones."""
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF_FEATURES")
    out = export_labeler(labeler, tmp_path / "export", quantize=True)

    def nodes(name: str) -> list:
        return list(onnx.load(str(out / name)).graph.node)

    assert [n.op_type for n in nodes("model.onnx")].count("LSTM") == 2  # characters, then words
    one_graph, split = nodes("model.int8.onnx"), nodes("model-char-vectors.int8.onnx")
    assert [n.op_type for n in split].count("LSTM") == 0
    def names(graph_nodes: list, op_type: str) -> list[str]:
        return [n.name for n in graph_nodes if n.op_type == op_type]

    assert len(names(one_graph, "LSTM")) == 1  # the character encoder's, left in float
    assert len(names(one_graph, "DynamicQuantizeLSTM")) == len(names(split, "DynamicQuantizeLSTM")) == 1

    def quantized_weights(name: str, graph_nodes: list) -> tuple[np.ndarray, np.ndarray]:
        initializers = {t.name: t for t in onnx.load(str(out / name)).graph.initializer}
        lstm = next(n for n in graph_nodes if n.op_type == "DynamicQuantizeLSTM")
        return tuple(numpy_helper.to_array(initializers[lstm.input[i]]) for i in (1, 8))  # W, its scales

    (w_one, _), (w_split, w_scale) = (quantized_weights("model.int8.onnx", one_graph),
                                      quantized_weights("model-char-vectors.int8.onnx", split))
    np.testing.assert_array_equal(w_one, w_split)  # the word LSTM in both, quantised alike
    assert w_split.shape[-1] == 4 * labeler.model_config.word_hidden  # not the character encoder's (4 x 8)
    assert w_scale.size > 1  # per channel: one scale per row of the input weights
    inputs = _graph_inputs(labeler, read_labelled(tiny_grobid).sequences[:6])
    sessions = [onnxruntime.InferenceSession(str(out / name), providers=["CPUExecutionProvider"])
                for name in ("model.onnx", "model.int8.onnx")]
    fp32, int8 = (session.run(["emissions"], inputs)[0] for session in sessions)
    assert np.abs(int8 - fp32).max() <= 0.05 * np.abs(fp32).max()


def test_external_viterbi_from_json_equals_engine(tmp_path: Path, tiny_grobid: Path) -> None:
    """What a Java/C++ program would do: onnxruntime emissions + Viterbi from crf.json only."""
    import onnxruntime

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    out = export_labeler(labeler, tmp_path / "export")
    crf = json.loads((out / "crf.json").read_text())
    labels = json.loads((out / "labels.json").read_text())
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    sequences = read_labelled(tiny_grobid).sequences[:6]
    data = labeler.encode(sequences)
    batch = data.batch(list(range(len(sequences))))
    feed = {"word_vectors": batch.word_vectors.numpy(), "char_ids": batch.char_ids.numpy(), "mask": batch.mask.long().numpy()}
    emissions = session.run(["emissions"], feed)[0]
    expected = labeler.predict(sequences)
    for row, sequence in enumerate(sequences):
        path = viterbi_from_crf_json(emissions[row, : len(sequence)], crf)
        assert [labels[k] for k in path] == expected[row].labels


def test_quantized_model_labels_every_token(tmp_path: Path, tiny_grobid: Path) -> None:
    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    export_labeler(labeler, tmp_path / "onnx", quantize=True)
    attach_onnx(labeler, tmp_path, tmp_path / "onnx", quantized=True)
    sequences = read_labelled(tiny_grobid).sequences
    predictions = labeler.predict(sequences)
    assert [len(p.labels) for p in predictions] == [len(s) for s in sequences]
    assert all(label in labeler.encoder.labels.items for p in predictions for label in p.labels)
    assert all(0.0 < s <= 1.0 + 1e-6 for p in predictions for s in p.scores)


def test_padded_birnn_equals_packed() -> None:
    torch.manual_seed(0)
    from textorch.models.embedders import run_packed_rnn

    lstm = torch.nn.LSTM(5, 4, batch_first=True, bidirectional=True).eval()
    x = torch.randn(3, 6, 5)
    lengths = torch.tensor([6, 2, 4])
    padded = PaddedBiRNN(lstm)(x, lengths)
    packed = run_packed_rnn(lstm, x, lengths)
    for row, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(padded[row, :n], packed[row, :n])


def test_cli_export_and_onnx_engine(tmp_path: Path, tiny_grobid: Path) -> None:
    from textorch.cli.main import main

    model = tmp_path / "model"
    assert main(["seq", "train", "--train", str(tiny_grobid), "--output", str(model), "--max-epoch", "1",
                 "--batch-size", "8", "--early-stop", "false", "--architecture", "BidLSTM_CRF_FEATURES"]) == 0
    assert main(["export", "onnx", "--model", str(model), "--quantize"]) == 0
    assert (model / "onnx" / "model.onnx").exists() and (model / "onnx" / "model.int8.onnx").exists()
    outputs = {}
    for engine in (["--engine", "torch"], ["--engine", "onnx"], ["--engine", "onnx", "--quantized"]):
        out = tmp_path / f"tagged{len(outputs)}.txt"
        assert main(["seq", "tag", "--model", str(model), "--input", str(tiny_grobid), "--input-format", "grobid",
                     "--output", str(out), *engine]) == 0
        outputs[" ".join(engine)] = [line.split()[-1] for line in out.read_text().splitlines() if line.strip()]
    assert outputs["--engine onnx"] == outputs["--engine torch"]
    assert len(outputs["--engine onnx --quantized"]) == len(outputs["--engine torch"])
    metrics = tmp_path / "m.json"
    assert main(["seq", "eval", "--model", str(model), "--test", str(tiny_grobid), "--engine", "onnx",
                 "--metrics-json", str(metrics)]) == 0
    assert "f1" in json.loads(metrics.read_text())


def test_export_refuses_to_replace_a_foreign_directory(tmp_path: Path, tiny_grobid: Path) -> None:
    from textorch.errors import ConfigError

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not an ONNX export"):
        export_labeler(labeler, precious)
    assert (precious / "notes.txt").read_text() == "keep me"
    export_labeler(labeler, tmp_path / "again")
    export_labeler(labeler, tmp_path / "again")  # an earlier export is replaced
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".again.")]


def test_automatic_exports_of_an_older_graph_revision_are_redone(tmp_path: Path, tiny_grobid: Path) -> None:
    from textorch.onnx.files import DESCRIPTION_FILE, GRAPH_REVISION

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    model = tmp_path / "model"
    labeler.save(model)
    default = attach_onnx(labeler, model)
    description_file = default / DESCRIPTION_FILE
    description = json.loads(description_file.read_text())
    assert description["graph_revision"] == GRAPH_REVISION
    del description["graph_revision"]  # what textorch 0.1 wrote: revision 1
    description_file.write_text(json.dumps(description))
    explicit = tmp_path / "explicit"
    import shutil

    shutil.copytree(default, explicit)
    attach_onnx(labeler, model, explicit)  # a directory the user names is used as it is
    assert "graph_revision" not in json.loads((explicit / DESCRIPTION_FILE).read_text())
    attach_onnx(labeler, model)  # the default one is exported again
    assert json.loads(description_file.read_text())["graph_revision"] == GRAPH_REVISION


def test_onnx_engine_runs_rows_of_very_different_lengths_in_groups(tmp_path: Path, tiny_grobid: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch mixing short and long sequences runs the graph once per group of similar lengths,
    each cut to its longest row (the engine's ``group_costs``, the call's ``batch_groups`` by
    :func:`textorch.models.cpu_routes.decide`): the same labels and scores as PyTorch, and as the one
    padded call."""
    from textorch.data.corpus import TokenSequence
    from textorch.models.padded_rnn import GroupCosts

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF_FEATURES")
    short = read_labelled(tiny_grobid).sequences
    long = [TokenSequence(tokens=[t for s in short[i:i + 12] for t in s.tokens],
                          labels=[lab for s in short[i:i + 12] for lab in s.labels],
                          features=[f for s in short[i:i + 12] for f in s.features]) for i in (0, 5)]
    sequences = [*short[:10], *long]
    expected = labeler.predict(sequences, batch_size=len(sequences))
    attach_onnx(labeler, tmp_path, tmp_path / "onnx")
    widths: list[int] = []
    run = labeler.runner.run
    monkeypatch.setattr(labeler.runner, "run", lambda output, feed: (widths.append(feed["mask"].shape[1]), run(output, feed))[1])
    grouped = labeler.predict(sequences, batch_size=len(sequences))
    longest = max(len(s) for s in sequences)
    assert len(widths) >= 2 and max(widths) == longest and min(widths) < longest / 3
    _assert_same(expected, grouped)
    monkeypatch.setattr(labeler.runner, "group_costs", GroupCosts(1.0, 1.0, 1))  # one group: no cut
    widths.clear()
    one_call = labeler.predict(sequences, batch_size=len(sequences))
    assert widths == [longest]
    _assert_same(one_call, grouped)


def test_auto_engine_runs_small_calls_in_onnx_runtime_and_large_ones_in_pytorch(
    tmp_path: Path, tiny_grobid: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textorch.onnx.engine import AutoRunner
    from textorch.onnx.opening import EngineOptions, run_loaded

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF_FEATURES")
    sequences = read_labelled(tiny_grobid).sequences
    expected = labeler.predict(sequences, batch_size=8)
    model = tmp_path / "model"
    labeler.save(model)
    assert run_loaded(labeler, model, EngineOptions()) == "auto"  # the default engine
    assert isinstance(labeler.runner, AutoRunner) and (model / "onnx" / "model.onnx").is_file()
    graph_calls: list[int] = []
    run = labeler.runner.onnx_runner.run
    monkeypatch.setattr(labeler.runner.onnx_runner, "run",
                        lambda output, feed: (graph_calls.append(int(feed["mask"].sum())), run(output, feed))[1])
    labeler.runner.max_tokens = sum(len(s) for s in sequences[:3])
    _assert_same(expected[:3], labeler.predict(sequences[:3], batch_size=8))  # small: the graph
    assert sum(graph_calls) == labeler.runner.max_tokens
    graph_calls.clear()
    _assert_same(expected, labeler.predict(sequences, batch_size=8))  # larger: PyTorch
    assert graph_calls == []
    _assert_same(expected[:6], [labeler.predict([s], batch_size=1)[0] for s in sequences[:6]])
    assert len(graph_calls) == 6


def test_auto_engine_keeps_pytorch_where_onnx_runtime_cannot_serve(
    tmp_path: Path, tiny_grobid: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    import textorch.onnx.engine as engine
    from textorch.onnx.opening import EngineOptions, run_loaded

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    model = tmp_path / "model"
    labeler.save(model)
    expected = labeler.predict(read_labelled(tiny_grobid).sequences[:4])
    with caplog.at_level("INFO", logger="textorch.onnx.opening"):
        assert run_loaded(labeler, model, EngineOptions(precision="bf16")) == "pytorch" and labeler.runner is None
    labeler.precision = "fp32"
    assert "--precision bf16 runs in PyTorch" in caplog.text

    def broken_export(*args, **kwargs):
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(engine, "export_model", broken_export)
    caplog.clear()
    assert run_loaded(labeler, model, EngineOptions()) == "pytorch"
    assert labeler.runner is None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "exporter exploded" in warnings[0]
    assert not (model / "onnx").exists()
    _assert_same(expected, labeler.predict(read_labelled(tiny_grobid).sequences[:4]))


def test_cli_tag_with_the_auto_engine_equals_pytorch(tmp_path: Path, tiny_grobid: Path) -> None:
    model = cli_trained_tagger(tmp_path / "model", tiny_grobid)
    labels = {engine: [row[-1] for row in cli_tagged_rows(model, tiny_grobid, "grobid", tmp_path / f"{engine}.txt",
                                                          "--engine", engine)]
              for engine in ("torch", "auto")}
    assert labels["auto"] == labels["torch"] and (model / "onnx" / "model.onnx").exists()


def test_load_takes_the_engine_as_the_commands_do(tmp_path: Path, tiny_grobid: Path) -> None:
    from textorch.errors import ConfigError
    from textorch.onnx.engine import AutoRunner, OnnxRunner

    labeler = _trained(tmp_path, tiny_grobid, "BidLSTM_CRF")
    model = tmp_path / "model"
    labeler.save(model)
    sequences = read_labelled(tiny_grobid).sequences[:5]
    expected = SequenceLabeler.load(model).predict(sequences)
    for engine, runner_type in (("auto", AutoRunner), ("onnx", OnnxRunner)):
        loaded = SequenceLabeler.load(model, engine=engine)
        assert isinstance(loaded.runner, runner_type)
        _assert_same(expected, loaded.predict(sequences))
    with pytest.raises(ConfigError, match="--engine must be one of"):
        SequenceLabeler.load(model, engine="tensorrt")
    with pytest.raises(ConfigError, match="--engine must be one of"):  # refused before the directory is read
        SequenceLabeler.load(tmp_path / "nowhere", engine="tensorrt")
