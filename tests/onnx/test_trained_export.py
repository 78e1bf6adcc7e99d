"""A trained model is saved with a current ONNX export and the record of its int8 check; a failed
export or check costs a warning, never the model; only rank 0 exports; the int8 rule."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("onnxruntime")

from conftest import cli_trained_tagger, write_tiny_grobid  # noqa: E402
from tiny_classification import TINY, tiny_examples, write_tiny_csv  # noqa: E402
from textorch.classification.classifier import TextClassifier  # noqa: E402
from textorch.cli.main import main  # noqa: E402
from textorch.data.cls_readers import ClsCorpus  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.onnx import engine, int8_agreement, trained_export  # noqa: E402
from textorch.onnx.engine import ensure_export  # noqa: E402
from textorch.onnx.files import ONNX_FILE, QUANTIZED_FILE, source_checksum  # noqa: E402
from textorch.onnx.int8_rule import (CHECK_FILE, MAX_F1_CHANGE, MIN_AGREEMENT, MIN_UNITS, Int8Check,  # noqa: E402
                                     int8_default_allowed, read_check, refusal, write_check)
from textorch.onnx.layout import read_description  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.tagging.training import train_sequence_labeler  # noqa: E402
from textorch.train.dist import DistContext  # noqa: E402


@pytest.fixture(autouse=True)
def export_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite turns the export after training off (tests/conftest.py); these tests are about it."""
    monkeypatch.delenv(trained_export.DISABLE_ENV, raising=False)


@pytest.fixture(scope="module")
def grobid_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_grobid(tmp_path_factory.mktemp("data") / "date.train")


@pytest.fixture(scope="module")
def cli_tagger(tmp_path_factory: pytest.TempPathFactory, grobid_file: Path) -> Path:
    """A tagger trained by ``seq train`` (one epoch, no validation: the check reads its training data)."""
    os.environ.pop(trained_export.DISABLE_ENV, None)
    try:
        return cli_trained_tagger(tmp_path_factory.mktemp("models") / "tagger", grobid_file)
    finally:
        os.environ[trained_export.DISABLE_ENV] = "1"


@contextmanager
def logged() -> Iterator[list[str]]:
    """textorch's log messages meanwhile (a CLI run in this process stops them reaching the root
    logger, so pytest's caplog would see none)."""
    messages: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    textorch_logger = logging.getLogger("textorch")
    level = textorch_logger.level
    textorch_logger.addHandler(handler)
    textorch_logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        textorch_logger.removeHandler(handler)
        textorch_logger.setLevel(level)


def _export_used_as_is(predictor, model: Path) -> None:
    """The engines take ``model/onnx`` as current: ``ensure_export`` neither exports nor rewrites it,
    ``--quantized`` included."""
    written = (model / "onnx" / ONNX_FILE).stat().st_mtime_ns
    elsewhere = model.with_name(model.name + "-elsewhere")
    with logged() as messages:
        assert ensure_export(predictor, model, quantize=True) == model / "onnx"
        ensure_export(predictor, elsewhere)  # the logging works: a model without export is exported
    assert [m for m in messages if "exporting" in m] == [f"no ONNX export in {elsewhere / 'onnx'}: exporting now"]
    assert (model / "onnx" / ONNX_FILE).stat().st_mtime_ns == written


def test_seq_train_leaves_a_current_export_and_its_int8_check(cli_tagger: Path, grobid_file: Path) -> None:
    description = read_description(cli_tagger / "onnx")
    assert description["source_weights_sha256"] == source_checksum(cli_tagger)
    assert (cli_tagger / "onnx" / QUANTIZED_FILE).is_file()
    labeler = SequenceLabeler.load(cli_tagger)
    _export_used_as_is(labeler, cli_tagger)
    corpus = read_labelled(grobid_file)
    record = read_check(cli_tagger / "onnx")
    # 40 sequences of 146 tokens, all read: no validation data, fewer tokens than the bound
    assert record["data"] == {"validation": 0, "training": 40}
    assert (record["sequences"], record["units"], record["unit"]) == (40, sum(len(s) for s in corpus.sequences), "tokens")
    assert record["agreeing_units"] <= record["units"]
    assert record["agreement"] == pytest.approx(record["agreeing_units"] / record["units"])
    assert record["f1_float"] == pytest.approx(100 * labeler.evaluate(corpus)["f1"], abs=1e-9)  # ONNX float = PyTorch
    assert record["source_weights_sha256"] == description["source_weights_sha256"]
    assert record["int8_revision"] == description["int8_revision"]
    assert record["thresholds"] == {"min_agreement": MIN_AGREEMENT, "max_f1_change": MAX_F1_CHANGE, "min_units": MIN_UNITS}
    assert record["verdict"].startswith("float only: too little data")  # 146 tokens < MIN_UNITS
    assert record["textorch_version"]
    assert not int8_default_allowed(cli_tagger / "onnx")


def test_grobid_train_leaves_a_current_export(tmp_path: Path, grobid_file: Path) -> None:
    """``grobid MODEL train``, what the GROBID bridge's training runs, ends in the same path."""
    model = tmp_path / "grobid"
    assert main(["grobid", "caption-like", "train", "--input", str(grobid_file), "--architecture",
                 "BidLSTM_CRF_FEATURES", "--max-epoch", "1", "--output", str(model)]) == 0
    assert read_description(model / "onnx")["source_weights_sha256"] == source_checksum(model)
    assert read_check(model / "onnx")["units"] > 0


def test_cls_train_leaves_a_current_export_and_its_int8_check(tmp_path: Path) -> None:
    data, model = write_tiny_csv(tmp_path / "t.csv", n=40), tmp_path / "cls"
    assert main(["cls", "train", "--train", str(data), "--output", str(model), "--max-epoch", "2", "--batch-size", "8",
                 "--hidden", "8", "--dense-size", "8", "--word-dim", "8"]) == 0
    classifier = TextClassifier.load(model)
    _export_used_as_is(classifier, model)
    record = read_check(model / "onnx")
    assert record["unit"] == "texts" and record["units"] == record["sequences"]
    # early stopping held out a tenth: the check reads those texts, then the training texts (too few)
    assert record["data"]["validation"] == 4 and record["data"]["validation"] + record["data"]["training"] == 40
    assert record["changed_sequences"] == record["units"] - record["agreeing_units"]


def test_api_train_checks_on_the_validation_data_first(tmp_path: Path, grobid_file: Path) -> None:
    corpus = read_labelled(grobid_file)
    train, valid = corpus.sequences[:30], corpus.sequences[30:]
    model = tmp_path / "api"
    labeler = train_sequence_labeler(type(corpus)(train, corpus.format, n_features=corpus.n_features),
                                     type(corpus)(valid, corpus.format, n_features=corpus.n_features),
                                     embeddings="none", output=model, max_epoch=1, batch_size=8)
    assert labeler.runner is None  # the check hands the model back as it was
    assert read_description(model / "onnx")["source_weights_sha256"] == source_checksum(model)
    record = read_check(model / "onnx")
    assert record["data"] == {"validation": 10, "training": 30}  # the validation sequences, then the training ones


def test_a_failing_export_leaves_the_model_saved_with_one_warning(tmp_path: Path, grobid_file: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("exporter broke\non two lines")

    monkeypatch.setattr(engine, "export_model", broken)
    model = tmp_path / "m"
    cli_trained_tagger(model, grobid_file)  # exits 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if " WARNING " in line]
    assert warnings == [f"{warnings[0][:8]} WARNING {model}: the model is saved, but its ONNX export failed "
                        "(RuntimeError: exporter broke on two lines); the ONNX engine exports it on first use"]
    assert not (model / "onnx").exists()
    assert SequenceLabeler.load(model).predict(read_labelled(grobid_file).sequences[:2])


def test_a_failing_check_keeps_the_export_without_int8_default(tmp_path: Path, grobid_file: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture) -> None:
    def broken(*args, **kwargs):
        raise ValueError("no check today")

    monkeypatch.setattr(int8_agreement, "check_int8", broken)
    model = tmp_path / "m"
    cli_trained_tagger(model, grobid_file)
    assert "int8 check failed (ValueError: no check today)" in capsys.readouterr().err
    assert (model / "onnx" / QUANTIZED_FILE).is_file() and not (model / "onnx" / CHECK_FILE).exists()
    assert not int8_default_allowed(model / "onnx")


@pytest.fixture(scope="module")
def trained(grobid_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[SequenceLabeler, Path]:
    """A tagger trained and saved without its export (the suite's switch is on in module fixtures)."""
    model = tmp_path_factory.mktemp("models") / "saved"
    labeler = train_sequence_labeler(str(grobid_file), embeddings="none", output=model, max_epoch=1, batch_size=8,
                                     early_stop=False)
    assert not (model / "onnx").exists()
    return labeler, model


def test_only_rank_0_exports(trained: tuple[SequenceLabeler, Path]) -> None:
    labeler, model = trained
    assert trained_export.export_after_training(labeler, model, DistContext(rank=1, world_size=2)) is None
    assert not (model / "onnx").exists()
    assert trained_export.export_after_training(labeler, model, DistContext(rank=0, world_size=2)) == model / "onnx"
    assert read_description(model / "onnx")["source_weights_sha256"] == source_checksum(model)


def test_the_switch_leaves_the_model_without_export(trained: tuple[SequenceLabeler, Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    labeler, _ = trained
    monkeypatch.setenv(trained_export.DISABLE_ENV, "1")
    labeler.save(tmp_path / "m")
    assert trained_export.export_after_training(labeler, tmp_path / "m", DistContext()) is None
    assert not (tmp_path / "m" / "onnx").exists()


def test_a_model_off_the_cpu_is_exported_from_a_cpu_copy_of_the_saved_one(
        trained: tuple[SequenceLabeler, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    labeler, _ = trained
    model = tmp_path / "gpu"
    labeler.save(model)
    loads = []
    real_load = SequenceLabeler.load.__func__

    def load(cls, directory, device="cpu", **kwargs):
        loads.append((Path(directory), str(device)))
        return real_load(cls, directory, device=device, **kwargs)

    monkeypatch.setattr(SequenceLabeler, "load", classmethod(load))
    monkeypatch.setattr(labeler, "device", torch.device("cuda"))  # as after training on a GPU; the weights stay here
    assert trained_export.export_after_training(labeler, model, DistContext()) == model / "onnx"
    assert loads == [(model, "cpu")]
    assert read_description(model / "onnx")["source_weights_sha256"] == source_checksum(model)


def test_transformers_and_a_missing_onnxruntime_block_the_export(monkeypatch: pytest.MonkeyPatch) -> None:
    tagger = SimpleNamespace(task="sequence_labelling", transformer=None)
    assert trained_export.training_export_blocker(tagger) is None
    assert "transformer" in trained_export.training_export_blocker(SimpleNamespace(task="sequence_labelling",
                                                                                   transformer=object()))
    assert "transformer" in trained_export.training_export_blocker(SimpleNamespace(task="text_classification",
                                                                                   transformer_parts=object()))
    import importlib.util

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: None if name == "onnxruntime" else real_find(name))
    assert "onnxruntime not installed" in trained_export.training_export_blocker(tagger)


@pytest.mark.parametrize(("units", "agreeing", "f1_float", "f1_int8", "allowed"), [
    (MIN_UNITS, MIN_UNITS, 90.0, 90.0, True),
    (MIN_UNITS - 1, MIN_UNITS - 1, 90.0, 90.0, False),          # too few units to show anything
    (1000, 995, 90.0, 90.1, True),                               # at both thresholds
    (1000, 994, 90.0, 90.0, False),                              # 99.4 % agree
    (3857, 3851, 87.22, 87.09, False),                           # 99.84 % agree, but F1 -0.13 point
    (1000, 1000, 90.0, 90.2, False),                             # a gain of F1 is a change too
])
def test_the_int8_rule(units: int, agreeing: int, f1_float: float, f1_int8: float, allowed: bool) -> None:
    assert (refusal(units, agreeing, f1_float, f1_int8) is None) is allowed


def test_int8_default_allowed_needs_a_passing_check_of_this_very_export(cli_tagger: Path, tmp_path: Path) -> None:
    export = tmp_path / "onnx"
    shutil.copytree(cli_tagger / "onnx", export)
    description = read_description(export)

    def check(**changes) -> Int8Check:
        numbers = dict(task="sequence_labelling", unit="tokens", sequences=100, units=2000, agreeing_units=2000,
                       changed_sequences=0, f1_float=90.0, f1_int8=90.0, data={"validation": 100, "training": 0},
                       source_weights_sha256=description["source_weights_sha256"],
                       int8_revision=description["int8_revision"], textorch_version="x", seconds=0.1)
        return Int8Check(**{**numbers, **changes})

    write_check(export, check())
    assert json.loads((export / CHECK_FILE).read_text())["verdict"] == "int8 allowed"
    assert int8_default_allowed(export)
    write_check(export, check(agreeing_units=1980))
    assert not int8_default_allowed(export)
    write_check(export, check(source_weights_sha256="0" * 64))  # a check of other weights
    assert not int8_default_allowed(export)
    write_check(export, check(int8_revision=description["int8_revision"] - 1))
    assert not int8_default_allowed(export)
    write_check(export, check())
    (export / QUANTIZED_FILE).unlink()
    assert not int8_default_allowed(export)
    assert not int8_default_allowed(tmp_path / "nowhere")


def test_the_check_data_is_validation_first_then_training_within_the_bound() -> None:
    def taken(valid: list[int], train: list[int], bound: int) -> tuple[list[int], dict]:
        return int8_agreement._taken(valid, train, lambda n: n, bound, seed=0)

    items, counts = taken([MIN_UNITS], [5, 5], 10 * MIN_UNITS)
    assert items == [MIN_UNITS] and counts == {"validation": 1, "training": 0}  # enough validation: no training data
    items, counts = taken([10, 0], [20, 30, 10 * MIN_UNITS], 10 * MIN_UNITS)
    assert sorted(items) == [10, 20, 30] and counts == {"validation": 1, "training": 2}  # too large, empty: left out
    items, _ = taken([], list(range(1, 200)), 500)
    assert sum(items) <= 500 and sum(items) > 450
    assert taken([], list(range(1, 200)), 500) == (items, _)  # seeded


def test_the_default_door_runs_the_int8_model_where_training_checked_it(cli_tagger: Path, tmp_path: Path) -> None:
    """``auto`` (every door's default) takes ``model.int8.onnx`` only where a passing check of this
    very export lies beside it; without one, or with an engine named, the float model."""
    from textorch.onnx.opening import EngineOptions
    from textorch.tagging.opening import open_tagger, torch_free_tagger

    model = tmp_path / "model"
    shutil.copytree(cli_tagger, model)
    description = read_description(model / "onnx")
    assert not int8_default_allowed(model / "onnx")  # the tiny data's own check: too few tokens

    def runs_int8(opened) -> bool:
        """Whether the network's graph is an int8 file (``model.int8.onnx``, ``model-char-vectors.int8.onnx``)."""
        predictor = opened.predictor
        session = getattr(predictor, "session", None) or predictor.runner.onnx_runner.session
        return Path(session._model_path).name.endswith(".int8.onnx")

    assert not runs_int8(open_tagger(model, predict_only=True))
    write_check(model / "onnx", Int8Check(
        task="sequence_labelling", unit="tokens", sequences=100, units=2000, agreeing_units=2000, changed_sequences=0,
        f1_float=90.0, f1_int8=90.0, data={"validation": 100, "training": 0},
        source_weights_sha256=description["source_weights_sha256"], int8_revision=description["int8_revision"],
        textorch_version="x", seconds=0.1))
    assert runs_int8(open_tagger(model, predict_only=True))  # the torch-free tagger
    assert runs_int8(SimpleNamespace(predictor=torch_free_tagger(model, EngineOptions())))  # seq tag's way to it
    assert runs_int8(open_tagger(model))  # the labeler's auto runner (server, facade)
    assert not runs_int8(open_tagger(model, EngineOptions(engine="onnx"), predict_only=True))
    assert open_tagger(model, EngineOptions(engine="torch")).predictor.runner is None
