"""A model that learned nothing is said: predicting one label on its own training data."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_tiny_grobid
from textorch.cli.main import main
from textorch.data.corpus import Corpus, TokenSequence
from textorch.tagging.learned_check import learned_nothing
from textorch.tagging.prediction import Prediction


class _Fixed:
    """A labeler stand-in whose every token gets ``label``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.calls = 0

    def predict(self, sequences, with_scores=False):
        self.calls += 1
        return [Prediction([self.label] * len(s), None) for s in sequences]


def _corpus(labels: list[list[str]]) -> Corpus:
    return Corpus([TokenSequence([f"t{i}" for i in range(len(x))], x) for x in labels], "grobid", path="train.txt")


def test_a_model_predicting_only_the_majority_label_is_found() -> None:
    train = _corpus([["O", "B-<title>", "I-<title>", "O"], ["B-<author>", "O"]])
    assert learned_nothing(_Fixed("I-<body>"), train).startswith(
        "the trained model predicts only <body> on 6 tokens of its own training data, which hold 3 label types "
        "(O 3, <title> 2, <author> 1...): it learned nothing")
    assert learned_nothing(_Fixed("O"), train).startswith("the trained model predicts no field (every token outside) on 6")


def test_a_model_with_several_labels_or_data_with_one_passes() -> None:
    train = _corpus([["O", "B-<title>"]])
    mixed = _Fixed("O")
    mixed.predict = lambda sequences, with_scores=False: [Prediction(["O", "B-<title>"], None)]  # type: ignore[method-assign]
    assert learned_nothing(mixed, train) is None
    one_label = _Fixed("O")
    assert learned_nothing(one_label, _corpus([["O", "O"]])) is None  # nothing to learn beyond O: nothing to check
    assert one_label.calls == 0


def test_training_that_learned_nothing_says_so(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.tagging.labeler import SequenceLabeler

    train = write_tiny_grobid(tmp_path / "date.train")
    output = tmp_path / "model"
    # the network of a run that collapsed: every token outside any field
    monkeypatch.setattr(SequenceLabeler, "predict",
                        lambda self, sequences, **_: [Prediction(["O"] * len(s), None) for s in sequences])
    code = main(["grobid", "date", "train", "--input", str(train), "--output", str(output), "--max-epoch", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 0  # a one-epoch trial may know nothing yet: said, not refused
    tokens = sum(1 for line in train.read_text().splitlines() if line.strip())
    assert f"the trained model predicts no field (every token outside) on {tokens} tokens of its own training data" in err
    assert "WARNING" in err and "it learned nothing; train for more epochs" in err


def _counts(tp: dict[str, int], fp: dict[str, int], fn: dict[str, int]):
    from textorch.eval.metrics import EntityCounts

    return EntityCounts(tp=tp, fp=fp, fn=fn)


def test_an_epoch_that_predicts_one_field_type_only_scores_zero_for_the_choice_of_epoch() -> None:
    from textorch.tagging.scoring import epoch_choice_score, one_type_only

    # every field called <figDesc>: its F1 is far from 0 (the dominant field is right) ...
    only_desc = _counts({"<figDesc>": 8}, {"<figDesc>": 2}, {"<figure_head>": 9, "<label>": 6})
    assert only_desc.scores()["f1"] > 0.4
    assert one_type_only(only_desc) == "<figDesc>"
    assert epoch_choice_score(only_desc) == 0.0  # ... but it is never the epoch kept
    structured = _counts({"<figDesc>": 7, "<label>": 2}, {"<figDesc>": 3, "<label>": 1}, {"<figure_head>": 9, "<label>": 4})
    assert one_type_only(structured) is None
    assert epoch_choice_score(structured) == structured.scores()["f1"]
    # a gold type seen fewer than three times may go unpredicted: one type then is no collapse
    rare_second = _counts({"<date>": 20}, {}, {"<date>": 1, "<note>": 2})
    assert one_type_only(rare_second) is None and epoch_choice_score(rare_second) > 0.9


def test_training_never_keeps_the_epoch_that_collapsed_to_one_field_type(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Epoch 2 scores the higher F1 by calling every field a <year>; epoch 1, lower, tells the
    fields apart: epoch 1 is kept."""
    from textorch.data.readers import read_grobid
    from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
    from textorch.tagging.labeler import SequenceLabeler

    corpus = read_grobid(write_tiny_grobid(tmp_path / "date.train"))
    by_epoch = iter([_counts({"<year>": 5, "<month>": 5}, {"<year>": 5, "<month>": 5}, {"<day>": 10, "<year>": 5, "<month>": 5}),
                     _counts({"<year>": 30}, {"<year>": 5}, {"<day>": 5, "<month>": 10})])
    monkeypatch.setattr(SequenceLabeler, "count_entities", lambda self, *args, **kwargs: next(by_epoch))
    labeler = SequenceLabeler.build(corpus, ModelConfig(), DataConfig(), seed=1)
    labeler.fit(corpus, corpus, TrainConfig(max_epoch=2, batch_size=8, patience=5, seed=1))
    assert [round(r.valid_score, 3) for r in labeler.training_result.history] == [0.4, 0.0]
    assert labeler.training_result.best_epoch == 1
