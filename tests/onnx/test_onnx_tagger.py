"""The ONNX Runtime tagger that runs without PyTorch: the same answers as ``--engine onnx`` through
the ``SequenceLabeler``, served only where its export is current, and a tagging command that never
imports torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from textorch.data.corpus import TokenSequence  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402
from textorch.onnx.layout import DESCRIPTION_FILE  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.tagging.onnx_tagger import NotServed, OnnxTagger  # noqa: E402
from corpus_vectors import write_corpus_vectors  # noqa: E402

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)
_CACHE: dict[str, Path] = {}


def _saved(tmp_path_factory: pytest.TempPathFactory, data: Path, architecture: str) -> Path:
    """A briefly trained model directory with its ONNX export in ``MODEL/onnx``, one per architecture."""

    def train() -> Path:
        root = tmp_path_factory.mktemp(architecture)
        corpus = read_labelled(data)
        vectors = write_corpus_vectors(root / "vectors.txt", corpus)
        labeler = SequenceLabeler.build(corpus, ModelConfig(architecture=architecture, **SMALL), DataConfig(),
                                        embeddings=open_embeddings(str(vectors), cache_dir=root / "cache"), seed=1)
        labeler.fit(corpus, None, TrainConfig(max_epoch=1, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
        model = root / "model"
        labeler.save(model)
        attach_onnx(labeler, model)  # exports into MODEL/onnx
        return model

    if architecture not in _CACHE:
        _CACHE[architecture] = train()
    return _CACHE[architecture]


@pytest.fixture(scope="module")
def grobid_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import write_tiny_grobid

    return write_tiny_grobid(tmp_path_factory.mktemp("data") / "tiny.grobid.txt")


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES_TEMPLATE", "BidLSTM", "BidLSTM_CNN_CRF"])
def test_the_same_answers_as_the_onnx_engine_of_the_labeler(tmp_path_factory, grobid_file: Path, architecture: str) -> None:
    model = _saved(tmp_path_factory, grobid_file, architecture)
    labeler = SequenceLabeler.load(model, engine="onnx")
    tagger = OnnxTagger.open(model, threads=1)
    sequences = read_labelled(grobid_file).sequences
    sequences = [*sequences[:5], TokenSequence([], line=1), *sequences[5:]]  # an empty sequence among them
    for batch_size in (1, 7, 64):
        expected = labeler.predict(sequences, batch_size=batch_size)
        got = tagger.predict(sequences, batch_size=batch_size)
        assert [p.labels for p in got] == [p.labels for p in expected]
        for a, b in zip(expected, got):
            np.testing.assert_allclose(b.scores, a.scores, atol=1e-5)
    bare = tagger.predict(sequences, batch_size=7, with_scores=False)
    assert [p.labels for p in bare] == [p.labels for p in expected] and all(p.scores is None for p in bare)
    assert got[5].labels == [] and got[5].scores == []



@pytest.mark.parametrize("architecture,decoder", [("BidLSTM_CRF", "crf_paths"), ("BidLSTM", "softmax_paths")])
def test_every_cpu_door_decodes_with_the_one_cpu_decoder(tmp_path_factory, grobid_file: Path,
                                                          monkeypatch: pytest.MonkeyPatch, architecture: str,
                                                          decoder: str) -> None:
    """The PyTorch engine (batches and a one-sequence call), the labeler's ONNX engine and the
    tagger without PyTorch all decode with :mod:`textorch.models.cpu_decoder`; the reference
    CRF's recursions never run at inference on the CPU."""
    from textorch.models import cpu_decoder, crf

    def refuse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the reference CRF decoded a CPU inference call")

    monkeypatch.setattr(crf, "viterbi", refuse)
    monkeypatch.setattr(crf, "marginal_probabilities", refuse)
    calls: list[str] = []
    real = getattr(cpu_decoder, decoder)
    monkeypatch.setattr(cpu_decoder, decoder, lambda *a, **k: calls.append(decoder) or real(*a, **k))
    model = _saved(tmp_path_factory, grobid_file, architecture)
    sequences = read_labelled(grobid_file).sequences
    doors = {
        "PyTorch, batches": lambda: SequenceLabeler.load(model, engine="torch").predict(sequences, batch_size=8),
        "PyTorch, one sequence": lambda: SequenceLabeler.load(model, engine="torch").predict(sequences[:1]),
        "the default (auto)": lambda: SequenceLabeler.load(model).predict(sequences[:1]),
        "ONNX engine": lambda: SequenceLabeler.load(model, engine="onnx").predict(sequences, batch_size=8),
        "without PyTorch": lambda: OnnxTagger.open(model).predict(sequences, batch_size=8),
    }
    for door, predict in doors.items():
        calls.clear()
        predictions = predict()
        assert calls, f"{door} decoded without {decoder}"
        assert all(p.scores is not None and len(p.scores) == len(p.labels) for p in predictions)

def test_served_only_from_a_current_export(tmp_path_factory, grobid_file: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(_saved(tmp_path_factory, grobid_file, "BidLSTM_CRF"), model)
    description_file = model / "onnx" / DESCRIPTION_FILE
    description = json.loads(description_file.read_text())
    OnnxTagger.open(model)  # served as exported

    older = {k: v for k, v in description.items() if k != "graph_revision"}
    description_file.write_text(json.dumps(older))
    with pytest.raises(NotServed, match="older graph revision"):
        OnnxTagger.open(model)  # --engine onnx would export this default directory again
    OnnxTagger.open(model, export_dir=model / "onnx")  # a directory the user names is used as it is

    (model / "onnx" / "char-encoder.onnx").rename(model / "aside.onnx")
    with pytest.raises(NotServed, match="char-encoder.onnx is missing"):
        OnnxTagger.open(model, export_dir=model / "onnx")  # a half export is never run
    (model / "aside.onnx").rename(model / "onnx" / "char-encoder.onnx")

    description_file.write_text(json.dumps({**description, "source_weights_sha256": "0" * 64}))
    with pytest.raises(NotServed, match="other weights"):
        OnnxTagger.open(model)
    shutil.rmtree(model / "onnx")
    with pytest.raises(NotServed, match="no readable"):
        OnnxTagger.open(model)
    with pytest.raises(NotServed, match="not a textorch tagger"):
        OnnxTagger.open(tmp_path)


def test_int8_runs_the_int8_split_network_and_older_int8_files_are_made_again(tmp_path_factory, grobid_file: Path,
                                                                              tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(_saved(tmp_path_factory, grobid_file, "BidLSTM_CRF_FEATURES_TEMPLATE"), model)
    with pytest.raises(NotServed, match="int8"):
        OnnxTagger.open(model, quantized=True)  # exported without --quantize
    labeler = SequenceLabeler.load(model, engine="torch")
    attach_onnx(labeler, model, quantized=True)  # what --engine onnx --quantized does: export again, with int8
    description_file = model / "onnx" / DESCRIPTION_FILE
    assert json.loads(description_file.read_text())["int8_revision"] == 2
    tagger = OnnxTagger.open(model, quantized=True, threads=1)
    assert tagger.char_session is not None  # characters encoded once per distinct token, in float
    assert Path(tagger.session._model_path).name == "model-char-vectors.int8.onnx"
    sequences = read_labelled(grobid_file).sequences
    int8, fp32 = tagger.predict(sequences), OnnxTagger.open(model, threads=1).predict(sequences)
    assert [len(p.labels) for p in int8] == [len(s) for s in sequences]
    agree = sum(a == b for p, q in zip(int8, fp32) for a, b in zip(p.labels, q.labels))
    assert agree >= 0.95 * sum(map(len, sequences))
    one_graph = labeler.predict(sequences)  # model.int8.onnx, its character encoder left in float
    assert [p.labels for p in one_graph] == [p.labels for p in int8]
    for a, b in zip(one_graph, int8):
        np.testing.assert_allclose(b.scores, a.scores, atol=1e-3)
    exported_at = description_file.stat().st_mtime_ns
    attach_onnx(SequenceLabeler.load(model, engine="torch"), model, quantized=True)
    assert description_file.stat().st_mtime_ns == exported_at  # a current int8 export is not made again

    older = {k: v for k, v in json.loads(description_file.read_text()).items() if k != "int8_revision"}
    del older["char_encoder"]["quantized_network_file"]
    description_file.write_text(json.dumps(older))  # int8 files of revision 1: one int8 graph, LSTMs in float
    with pytest.raises(NotServed, match="int8"):
        OnnxTagger.open(model, quantized=True)
    assert Path(OnnxTagger.open(model, export_dir=model / "onnx", quantized=True).session._model_path).name == \
        "model.int8.onnx"  # a directory the user names runs as it is: its one int8 graph
    attach_onnx(SequenceLabeler.load(model, engine="torch"), model, quantized=True)
    assert json.loads(description_file.read_text())["int8_revision"] == 2


def test_a_tagging_command_with_a_current_export_never_imports_torch(tmp_path_factory, grobid_file: Path,
                                                                     tmp_path: Path) -> None:
    model = _saved(tmp_path_factory, grobid_file, "BidLSTM_CRF_FEATURES_TEMPLATE")
    outputs = {}
    for engine in ("onnx", "auto", "torch"):
        out = tmp_path / f"{engine}.txt"
        script = ("import sys; from textorch.cli.main import main; "
                  f"code = main(['seq', 'tag', '--model', {str(model)!r}, '--input', {str(grobid_file)!r}, "
                  f"'--input-format', 'grobid', '--output', {str(out)!r}, '--engine', {engine!r}, '--quiet']); "
                  "print('torch' in sys.modules, 'numba' in sys.modules, 'tqdm' in sys.modules); sys.exit(code)")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        outputs[engine] = (done.stdout.split(), out.read_bytes())
    # Neither torch nor Numba was loaded, nor tqdm (no bar is drawn: an import the run never uses)
    assert outputs["onnx"][0] == outputs["auto"][0] == ["False", "False", "False"]
    assert outputs["torch"][0][0] == "True"
    assert outputs["onnx"][1] == outputs["auto"][1] == outputs["torch"][1]  # the same tagged file, byte for byte


def test_conll_and_text_input_tag_as_the_pytorch_engine_does(tmp_path: Path) -> None:
    from conftest import cli_trained_tagger, write_tiny_conll
    from textorch.cli.main import main

    data = write_tiny_conll(tmp_path / "tiny.conll")
    model = cli_trained_tagger(tmp_path / "model", data)
    assert main(["export", "onnx", "--model", str(model)]) == 0
    texts = tmp_path / "texts.txt"
    texts.write_text("Mary lives in Rome .\n\nPeter lives in Madrid and John in Paris .\n", encoding="utf-8")
    runs = {}
    for engine in ("torch", "onnx"):
        conll_out, json_out = tmp_path / f"{engine}.conll", tmp_path / f"{engine}.json"
        assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", "conll",
                     "--output", str(conll_out), "--engine", engine]) == 0
        assert main(["seq", "tag", "--model", str(model), "--input", str(texts), "--output", str(json_out),
                     "--engine", engine]) == 0
        runs[engine] = conll_out.read_bytes(), json.loads(json_out.read_text())["texts"]
    assert runs["onnx"][0] == runs["torch"][0]
    torch_texts, onnx_texts = runs["torch"][1], runs["onnx"][1]
    assert len(onnx_texts) == 3 and onnx_texts[1] == {"text": "", "entities": []}  # the empty line is kept
    assert any(text["entities"] for text in torch_texts)  # something to compare
    for a, b in zip(torch_texts, onnx_texts):
        assert [(e["text"], e["class"], e["beginOffset"], e["endOffset"]) for e in b["entities"]] == \
               [(e["text"], e["class"], e["beginOffset"], e["endOffset"]) for e in a["entities"]]
        np.testing.assert_allclose([e["score"] for e in b["entities"]], [e["score"] for e in a["entities"]], atol=1e-4)


@pytest.mark.parametrize("decode_rows", [1, 8, 10_000])
def test_decoding_in_groups_of_batches_changes_nothing(tmp_path_factory, grobid_file: Path, decode_rows: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The CRF of several batches (rows of different lengths, stacked) decoded in one pass gives
    each batch's own answer."""
    from textorch.tagging import onnx_tagger

    tagger = OnnxTagger.open(_saved(tmp_path_factory, grobid_file, "BidLSTM_CRF_FEATURES_TEMPLATE"), threads=1)
    sequences = read_labelled(grobid_file).sequences
    monkeypatch.setattr(onnx_tagger, "DECODE_ROWS", 0)  # every batch alone
    alone = tagger.predict(sequences, batch_size=3)
    monkeypatch.setattr(onnx_tagger, "DECODE_ROWS", decode_rows)
    grouped = tagger.predict(sequences, batch_size=3)
    assert [p.labels for p in grouped] == [p.labels for p in alone]
    for a, b in zip(alone, grouped):
        np.testing.assert_allclose(b.scores, a.scores, rtol=0, atol=1e-6)


class _RecordedSession:
    """An ONNX Runtime session that keeps a copy of every input it is fed."""

    def __init__(self, session: object) -> None:
        self.session = session
        self.fed: list[dict[str, np.ndarray]] = []

    def run(self, names: list[str], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.fed.append({name: np.array(array) for name, array in inputs.items()})
        return self.session.run(names, inputs)  # type: ignore[attr-defined]


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF_FEATURES_TEMPLATE", "BidLSTM_CNN_CRF"])
def test_batches_of_one_shape_fed_from_one_gather_get_their_own_inputs(tmp_path_factory, grobid_file: Path,
                                                                       architecture: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Consecutive batches of one shape take their graph inputs from one gather: each graph run is
    fed the very arrays gathering its batch alone gives, so the answers are the same."""
    tagger = OnnxTagger.open(_saved(tmp_path_factory, grobid_file, architecture), threads=1)
    sequences = read_labelled(grobid_file).sequences * 3  # each length three times: runs of one shape
    session, gathers = tagger.session, []
    inputs = tagger._inputs
    monkeypatch.setattr(tagger, "_inputs", lambda *args: gathers.append(1) or inputs(*args))
    tagger.session = spans = _RecordedSession(session)
    together = tagger.predict(sequences, batch_size=2)
    assert len(gathers) < len(spans.fed)  # some gathers fed several batches
    monkeypatch.setattr(OnnxTagger, "_input_spans", lambda self, encoded, group, lengths: [[b] for b in group])
    tagger.session = alone_fed = _RecordedSession(session)
    alone = tagger.predict(sequences, batch_size=2)
    assert len(spans.fed) == len(alone_fed.fed)
    for mine, own in zip(spans.fed, alone_fed.fed):
        assert sorted(mine) == sorted(own)
        for name in own:
            assert mine[name].shape == own[name].shape and mine[name].dtype == own[name].dtype, name
            np.testing.assert_array_equal(mine[name], own[name])
    assert [p.labels for p in together] == [p.labels for p in alone]
    assert [p.scores for p in together] == [p.scores for p in alone]


def test_the_stage_timing_diagnostic_times_every_stage_and_changes_no_label(tmp_path_factory, grobid_file: Path) -> None:
    import hashlib

    from benchmarks.diagnostics.stage_clocks import STAGES, one_pass
    from textorch.data.writers import grobid_block

    model = _saved(tmp_path_factory, grobid_file, "BidLSTM_CRF_FEATURES_TEMPLATE")
    sequences = read_labelled(grobid_file).sequences
    plain = OnnxTagger.open(model, threads=1).predict(sequences, batch_size=4, with_scores=False)
    expected = "".join(grobid_block(s, p.labels) for s, p in zip(sequences, plain))
    for route in ("rows", "sequences"):  # gold labels are read and ignored
        times, digest, tokens = one_pass(str(model), str(grobid_file), "onnx", "grobid", batch_size=4, route=route)
        assert set(times) == set(STAGES) and all(seconds >= 0 for seconds in times.values())
        assert times["network"] > 0 and times["parse"] > 0 and times["encode"] > 0 and times["write"] > 0, route
        assert tokens == sum(map(len, sequences))
        assert digest == hashlib.sha256(expected.encode("utf-8")).hexdigest(), route

    int8_model = tmp_path_factory.mktemp("int8") / "model"
    shutil.copytree(model, int8_model)
    attach_onnx(SequenceLabeler.load(int8_model), int8_model, quantized=True)
    _, digest, _ = one_pass(str(int8_model), str(grobid_file), "onnx", "grobid", batch_size=4, quantized=True)
    int8 = OnnxTagger.open(int8_model, threads=1, quantized=True).predict(sequences, batch_size=4, with_scores=False)
    assert digest == hashlib.sha256("".join(grobid_block(s, p.labels) for s, p in zip(sequences, int8)).encode()).hexdigest()


def test_a_graph_onnx_runtime_cannot_load_is_not_served_and_the_command_still_tags(
        tmp_path_factory, grobid_file: Path, tmp_path: Path) -> None:
    from textorch.cli.main import main

    model = tmp_path / "model"
    shutil.copytree(_saved(tmp_path_factory, grobid_file, "BidLSTM_CRF"), model)
    expected = tmp_path / "expected.txt"
    assert main(["seq", "tag", "--model", str(model), "--input", str(grobid_file), "--input-format", "grobid",
                 "--output", str(expected), "--engine", "torch", "--quiet"]) == 0
    encoder = model / "onnx" / "char-encoder.onnx"
    encoder.write_bytes(encoder.read_bytes()[:100])  # truncated
    with pytest.raises(NotServed, match="char-encoder.onnx cannot be loaded"):
        OnnxTagger.open(model)
    for engine in ("auto", "onnx"):  # the SequenceLabeler path, which never reads that file, tags instead
        out = tmp_path / f"{engine}.txt"
        assert main(["seq", "tag", "--model", str(model), "--input", str(grobid_file), "--input-format", "grobid",
                     "--output", str(out), "--engine", engine, "--quiet"]) == 0
        assert out.read_bytes() == expected.read_bytes()


@pytest.mark.parametrize("visible,driver,expected", [
    (None, True, True), (None, False, False), ("", True, False), ("-1", True, False), ("0", True, True)])
def test_device_auto_leaves_a_visible_gpu_to_pytorch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    visible: str | None, driver: bool, expected: bool) -> None:
    from textorch.onnx import opening

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    real_path = opening.Path
    fake = {"/proc/driver/nvidia/gpus": tmp_path / "gpus", "/dev/kfd": tmp_path / "kfd"}
    (tmp_path / "gpus").mkdir()
    if driver:
        (tmp_path / "gpus" / "0000:00:01.0").mkdir()
    monkeypatch.setattr(opening, "Path", lambda p: real_path(fake.get(str(p), p)))
    assert opening.gpu_visible() is expected
    for engine in ("onnx", "auto"):
        blocker = opening.torch_free_blocker(opening.EngineOptions(engine, device="auto"))
        # A visible GPU: PyTorch decides (and refuses --engine onnx there), before any model is read.
        assert (blocker is not None and "GPU" in blocker) if expected else blocker is None


def test_the_pytorch_stage_diagnostic_times_every_stage_writes_the_labels_and_unwraps(tmp_path_factory,
                                                                                      grobid_file: Path) -> None:
    import hashlib

    from benchmarks.diagnostics.stage_clocks import STAGES, one_pass
    from textorch.data.writers import grobid_block
    from textorch.models import cpu_decoder
    from textorch.models.crf import CRF
    from textorch.tagging.encoded import EncodedData

    unwrapped = (EncodedData.batch, EncodedData.token_vectors, CRF.best_paths_with_confidence, cpu_decoder.crf_paths)
    model = _saved(tmp_path_factory, grobid_file, "BidLSTM_CRF_FEATURES_TEMPLATE")
    sequences = read_labelled(grobid_file).sequences
    plain = SequenceLabeler.load(model, engine="torch").predict(sequences, batch_size=4, with_scores=False)
    expected = "".join(grobid_block(s, p.labels) for s, p in zip(sequences, plain))
    times, digest, tokens = one_pass(str(model), str(grobid_file), "torch", "grobid", batch_size=4)
    assert set(times) == set(STAGES) and all(seconds >= 0 for seconds in times.values())
    assert all(times[stage] > 0 for stage in ("parse", "encode", "inputs", "network", "crf", "write")), times
    assert tokens == sum(map(len, sequences))
    assert digest == hashlib.sha256(expected.encode("utf-8")).hexdigest()
    assert (EncodedData.batch, EncodedData.token_vectors, CRF.best_paths_with_confidence,
            cpu_decoder.crf_paths) == unwrapped


def test_the_tagger_reads_its_feature_table_under_the_name_the_network_saves_it(grobid_file: Path) -> None:
    from textorch.tagging.onnx_tagger import TEMPLATE_TABLE_WEIGHT

    corpus = read_labelled(grobid_file)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", **SMALL), DataConfig())
    assert TEMPLATE_TABLE_WEIGHT in labeler.model.state_dict()
