"""Training reports: history.json / history.csv / learning-curves.png in every trained model
directory, ``textorch report``, and the optional TensorBoard callback."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import write_tiny_grobid
from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
from textorch.cli.main import main
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.cls_readers import ClsCorpus, ClsExample
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError
from textorch.tagging.labeler import SequenceLabeler
from textorch.train.curves import _offsets
from textorch.train.history import RunRecord, TrainingHistory, history_files, read_history
from textorch.train.tensorboard import TensorBoardLogger, tensorboard_callbacks
from textorch.train.trainer import EpochRecord

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=8, feature_dim=3, feature_output_dim=8, dropout=0.1)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRAINED_FILES = ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]



@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[SequenceLabeler, Path]:
    root = tmp_path_factory.mktemp("reports")
    corpus = read_labelled(write_tiny_grobid(root / "date.train", n=24))
    labeler = SequenceLabeler.build(corpus, ModelConfig(**SMALL), DataConfig(), seed=1)
    labeler.fit(corpus, corpus, TrainConfig(max_epoch=3, batch_size=8, learning_rate=0.02, patience=3, seed=1))
    return labeler, labeler.save(root / "model")


def test_trained_model_directory_holds_history_files_and_png(trained: tuple[SequenceLabeler, Path]) -> None:
    labeler, model = trained
    assert sorted(p.name for p in model.iterdir()) == TRAINED_FILES
    assert (model / "learning-curves.png").read_bytes()[:8] == PNG_MAGIC
    epochs = labeler.training_result.history
    assert len(epochs) == 3
    document = json.loads((model / "history.json").read_text())
    assert document["task"] == "sequence_labelling" and document["metric"] == "f1"
    (run,) = document["runs"]
    assert [e["epoch"] for e in run["epochs"]] == [1, 2, 3]
    assert [e["loss"] for e in run["epochs"]] == [r.loss for r in epochs]
    assert [e["valid_score"] for e in run["epochs"]] == [r.valid_score for r in epochs]
    assert run["best_epoch"] == labeler.training_result.best_epoch
    assert run["best_score"] == max(r.valid_score for r in epochs)
    with open(model / "history.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3
    assert list(rows[0]) == ["run", "epoch", "loss", "valid_score", "learning_rate", "seconds", "tokens_per_s"]
    assert [float(r["loss"]) for r in rows] == pytest.approx([r.loss for r in epochs])
    assert all(float(r["learning_rate"]) == 0.02 and float(r["seconds"]) > 0 for r in rows)
    # the history does not get in the way of loading
    assert SequenceLabeler.load(model).encoder.labels.items == labeler.encoder.labels.items


def test_report_command_prints_history_and_final_scores(tiny_grobid: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "m"
    code = main(["seq", "train-eval", "--train", str(tiny_grobid), "--output", str(model), "--max-epoch", "2",
                 "--batch-size", "8", "--learning-rate", "0.01", "--seed", "3"])
    assert code == 0
    capsys.readouterr()
    assert main(["report", str(model)]) == 0
    out = capsys.readouterr().out
    history = read_history(model)
    assert history.final_scores is not None and history.final_scores["n_sequences"] == 4  # 10% of 40
    assert "(10% held out)" in history.final_scores_on
    assert "architecture BidLSTM_CRF" in out and "run train: 2 epochs" in out
    table = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert len(table) == 2 and sum(line.split()[0].endswith("*") for line in table) == 1
    assert f"{history.runs[0].epochs[1]['loss']:.4f}" in table[1]
    assert "final scores of the saved model" in out and "micro avg" in out
    assert main(["report", str(model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["best_epoch"] == history.runs[0].best_epoch


def test_report_on_a_directory_without_history_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "m").mkdir()
    assert main(["report", str(tmp_path / "m")]) == 2
    assert "history.json: missing" in capsys.readouterr().err


def test_untrained_model_has_no_history_files(tiny_grobid: Path, tmp_path: Path) -> None:
    corpus = read_labelled(tiny_grobid)
    labeler = SequenceLabeler.build(corpus, ModelConfig(**SMALL), DataConfig(), seed=1)
    target = labeler.save(tmp_path / "untrained")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors", "vocab.json"]


def test_classifier_directory_holds_history_too(tmp_path: Path) -> None:
    examples = [ClsExample(f"{word} item .", (label,), i + 2)
                for i, (word, label) in enumerate([("good", "pos"), ("bad", "neg")] * 8)]
    corpus = ClsCorpus(examples)
    config = ClsModelConfig(architecture="gru", hidden=4, dense_size=4, word_dim=4, fold_count=2)
    classifier = TextClassifier.build(corpus, config, ClsDataConfig(), seed=1)
    classifier.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.01, seed=1))
    target = classifier.save(tmp_path / "cls")
    assert sorted(p.name for p in target.iterdir()) == TRAINED_FILES
    history = read_history(target)
    assert history.task == "text_classification" and history.metric == "macro_f1"
    assert [r.name for r in history.runs] == ["member 1", "member 2"]
    assert all(len(r.epochs) == len(rep.training.history) for r, rep in zip(history.runs, classifier.fold_reports))
    rows = (target / "history.csv").read_text().splitlines()
    assert len(rows) == 1 + sum(len(r.epochs) for r in history.runs)
    assert (target / "learning-curves.png").read_bytes()[:8] == PNG_MAGIC


def test_history_json_is_strict_json_and_round_trips() -> None:
    run = RunRecord("train", [{"epoch": 1, "loss": math.nan, "valid_score": None, "learning_rate": 0.001,
                               "seconds": 1.0, "tokens_per_s": 10.0}], best_epoch=1)
    files = history_files(TrainingHistory("sequence_labelling", "f1", [run]))
    text = files["history.json"]
    assert "NaN" not in text and json.loads(text)["runs"][0]["epochs"][0]["loss"] is None
    again = TrainingHistory.from_json(json.loads(text))
    assert again.runs[0].name == "train" and again.kept is again.runs[0]
    assert files["learning-curves.png"][:8] == PNG_MAGIC  # drawn even without validation scores


def test_continuing_runs_are_drawn_after_the_run_they_continue() -> None:
    runs = [RunRecord("a", [{}] * 3), RunRecord("b", [{}] * 2, continues=True), RunRecord("c", [{}] * 4)]
    assert _offsets(runs) == [0, 3, 0]


class _FakeWriter:
    def __init__(self, log_dir: str) -> None:
        self.log_dir, self.scalars, self.flushes = log_dir, [], 0

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        pass


def test_tensorboard_logger_writes_one_scalar_set_per_epoch_on_the_main_process(tmp_path: Path) -> None:
    writers: list[_FakeWriter] = []
    logger = TensorBoardLogger(tmp_path / "tb", "f1", writer_factory=lambda log_dir: writers.append(_FakeWriter(log_dir)) or writers[-1])
    main_trainer, other = SimpleNamespace(ctx=SimpleNamespace(is_main=True)), SimpleNamespace(ctx=SimpleNamespace(is_main=False))
    logger.on_epoch_end(other, EpochRecord(1, 2.0, 0.5, 0.01, 1.0, 100.0), True)
    assert writers == []  # only rank 0 writes
    logger.on_epoch_end(main_trainer, EpochRecord(1, 2.0, 0.5, 0.01, 1.0, 100.0), True)
    logger.on_epoch_end(main_trainer, EpochRecord(2, 1.5, None, 0.01, 1.0, 90.0), False)
    (writer,) = writers
    assert writer.log_dir == str(tmp_path / "tb") and writer.flushes == 2
    assert ("train/loss", 1.5, 2) in writer.scalars and ("valid/f1", 0.5, 1) in writer.scalars
    assert not [s for s in writer.scalars if s[0] == "valid/f1" and s[2] == 2]  # no score, no point
    assert tensorboard_callbacks(None, "f1") == []


def test_tensorboard_option_without_the_package_fails_before_training(tiny_grobid: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="pip install"):
            tensorboard_callbacks(str(tmp_path / "tb"), "f1")
        code = main(["seq", "train", "--train", str(tiny_grobid), "--output", str(tmp_path / "m"), "--max-epoch", "1",
                     "--tensorboard", str(tmp_path / "tb")])
        assert code == 2 and "tensorboard" in capsys.readouterr().err
        assert not (tmp_path / "m").exists()
        return
    code = main(["seq", "train", "--train", str(tiny_grobid), "--output", str(tmp_path / "m"), "--max-epoch", "2",
                 "--batch-size", "8", "--tensorboard", str(tmp_path / "tb")])
    assert code == 0 and list((tmp_path / "tb").glob("events.out.tfevents.*"))
