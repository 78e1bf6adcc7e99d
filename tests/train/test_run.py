"""The run skeleton both tasks train through (:mod:`textorch.train.run`): the order of its steps,
what it records and saves, and the already-trained check that returns a finished run's outcome
without training, with a stand-in task first, then with each real task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import write_tiny_conll
from tiny_classification import write_tiny_csv
from textorch.classification import training as cls_training
from textorch.classification.config import ClsDataConfig, ClsModelConfig
from textorch.tagging import training as seq_training
from textorch.tagging.config import DataConfig, ModelConfig
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.config import TrainConfig
from textorch.train.dist import DistContext
from textorch.train.history import TrainingHistory
from textorch.train.resume import COMPLETE, FRESH, RunCheckpoints
from textorch.train.run import Fitted, RunOutcome, TrainingRun


@dataclass
class _Data:
    """A stand-in corpus: what the skeleton reads of one is its size, path and format."""

    path: str
    size: int
    format: str = "toy"

    def __len__(self) -> int:
        return self.size


class _Model:
    """A stand-in model that notes what the run does with it."""

    loaded: list[Path] = []

    def __init__(self, name: str = "new") -> None:
        self.name = name
        self.history = TrainingHistory("toy", "f1")
        self.saved_to: list[tuple[str, dict | None]] = []

    @classmethod
    def load(cls, directory, device="cpu", cache_dir=None) -> "_Model":
        cls.loaded.append(Path(directory))
        return cls("loaded")

    def save(self, directory, training_run=None) -> Path:
        self.saved_to.append((str(directory), training_run))
        return Path(directory)

    def evaluate(self, corpus, ctx=None) -> dict:
        return {"f1": 0.5, "on": corpus.path, "model": self.name}


class _ToyRun(TrainingRun[_Model, _Data]):
    model_type = _Model
    data_line = "data: %s (%s): %d train, %d valid, %d test"

    def __init__(self, output: str | None, fitted_scores: dict | None = None) -> None:
        super().__init__(output, DistContext(), "cpu", None)
        self.steps: list[str] = []
        self.fitted_scores = fitted_scores

    def split(self, train, valid, test):
        self.steps.append("split")
        return _Data(train.path, train.size - 2), _Data("held-out", 2), test

    def fit(self, train, valid, test):
        self.steps.append("fit")
        return Fitted(_Model(), self.fitted_scores, {"scores_on": "held-out fold", "scores": []})

    def score(self, model, test):
        self.steps.append("score")
        return super().score(model, test)

    def export(self, model, output, valid, train):
        self.steps.append(f"export {output} after {len(model.saved_to)} save(s), checked on {valid.path}")


def _finished_run(tmp_path: Path, output: Path | None, record: dict | None = None) -> RunCheckpoints:
    return RunCheckpoints(CheckpointOptions(resume=True), tmp_path / "ck", None, output, {}, "abc", COMPLETE,
                          record or {})


def test_a_new_run_splits_fits_scores_records_and_saves_in_that_order(tmp_path: Path, caplog) -> None:
    caplog.set_level("INFO")
    output = str(tmp_path / "model")
    run = _ToyRun(output)
    outcome = run.on_corpora(_Data("train.txt", 10), None, _Data("test.txt", 3))
    assert run.steps == ["split", "fit", "score", f"export {output} after 1 save(s), checked on held-out"]
    assert isinstance(outcome, RunOutcome) and outcome.model is not None
    assert outcome.splits == {"train": 8, "valid": 2, "test": 3}
    assert outcome.test_scores == {"f1": 0.5, "on": "test.txt", "model": "new"}
    assert outcome.model.saved_to == [(output, None)]  # no checkpoints: no run recorded in the model
    history = outcome.model.history
    assert (history.final_scores, history.final_scores_on) == (outcome.test_scores, "test.txt")
    assert history.folds == outcome.folds == {"scores_on": "held-out fold", "scores": []}
    assert outcome.metrics() == {**outcome.test_scores, "folds": outcome.folds}
    assert "data: train.txt (toy): 8 train, 2 valid, 3 test" in caplog.text
    assert f"model saved to {output}" in caplog.text


def test_scores_the_fit_brought_are_kept_and_nothing_is_saved_without_an_output() -> None:
    run = _ToyRun(None, fitted_scores={"f1": 0.9})
    outcome = run.on_corpora(_Data("train.txt", 10), None, _Data("test.txt", 3))
    assert run.steps == ["split", "fit"]  # neither scored again nor saved nor exported
    assert outcome.test_scores == {"f1": 0.9} and outcome.model.saved_to == []


def test_a_finished_run_gives_its_saved_model_scored_again_without_training(tmp_path: Path) -> None:
    _Model.loaded = []
    run = _ToyRun(str(tmp_path / "model"))
    run.run = _finished_run(tmp_path, tmp_path / "model")
    outcome = run.train(_Data("train.txt", 10), None, _Data("test.txt", 3))
    assert run.steps == ["split", "score"]  # no fit, no save, no export
    assert _Model.loaded == [tmp_path / "model"]
    assert outcome.model.name == "loaded" and outcome.model.saved_to == []
    assert outcome.test_scores == {"f1": 0.5, "on": "test.txt", "model": "loaded"}
    assert outcome.splits == {"train": 8, "valid": 2, "test": 3}


def test_a_finished_run_without_output_gives_the_scores_it_recorded(tmp_path: Path) -> None:
    run = _ToyRun(None)
    run.run = _finished_run(tmp_path, None, {"test_scores": {"f1": 0.75}})
    outcome = run.train(_Data("train.txt", 10), None, _Data("test.txt", 3))
    assert run.steps == ["split"]
    assert outcome.model is None and outcome.test_scores == {"f1": 0.75}


def test_a_fresh_checkpointed_run_records_itself_in_the_saved_model(tmp_path: Path) -> None:
    output = tmp_path / "model"
    run = _ToyRun(str(output))
    run.run = RunCheckpoints(CheckpointOptions(), output / "checkpoints", None, output, {}, "abc", FRESH)
    outcome = run.train(_Data("train.txt", 10), None, None)
    assert outcome.model.saved_to == [(str(output), {"sha256": "abc"})]
    assert outcome.test_scores is None and run.steps[-1].startswith("export")


# ------------------------------------------------------------------ the real tasks
def _no_training(*args, **kwargs):
    raise AssertionError("a finished run was trained again")


def test_a_finished_tagger_run_resumed_is_not_trained_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, output = write_tiny_conll(tmp_path / "t.conll", n=30), str(tmp_path / "model")
    configs = (ModelConfig(char_dim=4, char_hidden=4, word_hidden=4), TrainConfig(max_epoch=1, batch_size=8, seed=2),
               DataConfig(embeddings="none"))
    first = seq_training.train_tagger(str(data), output, *configs, hold_out_test=True, checkpoints=CheckpointOptions())
    monkeypatch.setattr(seq_training._TaggerRun, "fit", _no_training)
    again = seq_training.train_tagger(str(data), output, *configs, hold_out_test=True,
                                      checkpoints=CheckpointOptions(resume=True))
    assert isinstance(again, seq_training.TrainOutcome) and again.labeler is not None
    assert again.labeler is not first.labeler  # read back from the output
    assert again.test_scores == first.test_scores and again.splits == first.splits


def test_a_finished_classifier_run_resumed_is_not_trained_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, output = write_tiny_csv(tmp_path / "train.csv", n=60), str(tmp_path / "model")
    configs = (ClsModelConfig(architecture="gru_simple", hidden=8, dense_size=8, word_dim=8, fold_count=2),
               TrainConfig(max_epoch=1, batch_size=8, seed=3), ClsDataConfig(embeddings="none"))
    first = cls_training.train_classifier(str(data), output, *configs, hold_out_test=True,
                                          checkpoints=CheckpointOptions())
    monkeypatch.setattr(cls_training._ClassifierRun, "fit", _no_training)
    again = cls_training.train_classifier(str(data), output, *configs, hold_out_test=True,
                                          checkpoints=CheckpointOptions(resume=True))
    assert isinstance(again, cls_training.ClsTrainOutcome) and again.classifier is not None
    assert again.classifier is not first.classifier
    assert again.test_scores == first.test_scores and again.splits == first.splits
    assert again.fold_scores_on == first.fold_scores_on == "test" and again.fold_scores == first.fold_scores
    assert again.metrics() == first.metrics()
