"""benchmarks/diagnostics/int8_f1.py: both engines scored by one scorer, int8 files made where missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

from benchmarks.diagnostics import int8_f1  # noqa: E402
from corpus_vectors import write_corpus_vectors  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402
from textorch.onnx.layout import DESCRIPTION_FILE  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.tagging.onnx_tagger import OnnxTagger  # noqa: E402

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)


def _saved_model(tmp_path: Path, data: Path) -> Path:
    corpus = read_labelled(data)
    vectors = write_corpus_vectors(tmp_path / "vectors.txt", corpus)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", **SMALL),
                                    DataConfig(), embeddings=open_embeddings(str(vectors), cache_dir=tmp_path / "cache"),
                                    seed=1)
    labeler.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    return labeler.save(tmp_path / "model")


def test_both_engines_are_scored_alike_and_the_int8_files_are_made_first(tmp_path: Path) -> None:
    from conftest import write_tiny_grobid

    data = write_tiny_grobid(tmp_path / "tiny.grobid.txt")
    model = _saved_model(tmp_path, data)
    row = int8_f1.compare_model(model, data, "grobid")  # the model had no export at all
    assert json.loads((model / "onnx" / DESCRIPTION_FILE).read_text())["int8_revision"] == 2
    sequences = [s for s in read_labelled(data).sequences if len(s)]
    labeler = SequenceLabeler.load(model, engine="onnx")
    assert row["f1_fp32"] == pytest.approx(100 * labeler.evaluate(read_labelled(data))["f1"])
    attach_onnx(labeler, model, quantized=True)  # the int8 model through the other route, scored by the library
    assert row["f1_int8"] == pytest.approx(100 * labeler.evaluate(read_labelled(data))["f1"])
    fp32 = OnnxTagger.open(model).predict(sequences)
    int8 = OnnxTagger.open(model, quantized=True).predict(sequences)
    assert row["tokens_changed"] == sum(a != b for p, q in zip(fp32, int8) for a, b in zip(p.labels, q.labels))
    assert row["sequences"] == len(sequences) and row["tokens"] == sum(map(len, sequences))
    both = int8_f1.pooled([row, row])
    assert both["seeds"] == 2 and both["f1_fp32"] == pytest.approx(row["f1_fp32"])
    assert both["diff"] == pytest.approx(row["f1_int8"] - row["f1_fp32"])


def test_one_test_file_and_one_corpus_name_per_model(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        int8_f1.parse_args(["--model", "a", "b", "--test", "t", "--corpus", "date", "date"])
    assert exit_info.value.code == 2
    assert "one value each per model" in capsys.readouterr().err


def test_the_int8_column_comes_from_the_int8_tagger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An int8 tagger that answers ``O`` everywhere shows in the int8 column alone."""
    from conftest import write_tiny_grobid
    from textorch.tagging.prediction import Prediction

    data = write_tiny_grobid(tmp_path / "tiny.grobid.txt")
    model = _saved_model(tmp_path, data)
    real_open = OnnxTagger.open

    def open_tagger(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        tagger = real_open(*args, **kwargs)
        if kwargs.get("quantized"):
            tagger.predict = lambda sequences, **_: [Prediction(["O"] * len(s), None) for s in sequences]
        return tagger

    monkeypatch.setattr(int8_f1.OnnxTagger, "open", open_tagger)
    row = int8_f1.compare_model(model, data, "grobid")
    fp32 = real_open(model).predict([s for s in read_labelled(data).sequences if len(s)])
    assert row["f1_int8"] == 0.0 and row["f1_fp32"] > 0
    assert row["tokens_changed"] == sum(label != "O" for p in fp32 for label in p.labels)
