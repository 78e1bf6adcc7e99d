"""n-fold training (``--fold-count``) and incremental training (``--incremental --input-model``)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from conftest import write_tiny_grobid
from textorch.cli.main import main
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError, DataError
from textorch.data.splits import fold_indices
from textorch.tagging.incremental import prepare_incremental
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler
from textorch.tagging.training import train_corpora
from textorch.train.history import read_history

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, feature_dim=3, feature_output_dim=8, dropout=0.1)



def write_weekday_dates(path: Path, n: int = 32) -> Path:
    """Dates led by a weekday (a label the tiny date model never saw) and a month with an umlaut."""
    days, months = ["Monday", "Tuesday", "Friday", "Sunday"], ["June", "März", "July", "May"]
    lines = []
    for i in range(n):
        rows = [(days[i % 4], "I-<weekday>"), (months[(i // 4) % 4], "I-<month>"), (str(1 + i % 28), "I-<day>"),
                (",", "I-<other>"), (str(1990 + i % 30), "I-<year>")]
        for j, (token, label) in enumerate(rows):
            position = "LINESTART" if j == 0 else ("LINEEND" if j == len(rows) - 1 else "LINEIN")
            caps = "INITCAP" if token[0].isupper() else "NOCAPS"
            lines.append(f"{token} {token.lower()} {position} {caps} {'COMMA' if token == ',' else 'NOPUNCT'} {label}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_fold_indices_partition_the_data() -> None:
    folds = fold_indices(11, 3, seed=5)
    assert sorted(i for fold in folds for i in fold) == list(range(11))
    assert sorted(len(f) for f in folds) == [3, 4, 4]
    assert fold_indices(11, 3, seed=5) == folds and fold_indices(11, 3, seed=6) != folds
    with pytest.raises(ConfigError, match="at least 5"):
        fold_indices(4, 5, seed=1)


def test_n_fold_keeps_the_best_validation_fold_and_summarises_per_label(tiny_grobid: Path, tmp_path: Path) -> None:
    corpus = read_labelled(tiny_grobid)
    train = TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.02, seed=2)
    outcome = train_corpora(corpus, str(tmp_path / "m"), ModelConfig(**SMALL), train, DataConfig(),
                            hold_out_test=True, fold_count=2)
    folds = outcome.folds
    assert folds["scores_on"] == "test" and len(folds["scores"]) == 2
    assert folds["kept"] == max(range(2), key=lambda i: folds["valid_f1"][i])
    assert outcome.test_scores == folds["scores"][folds["kept"]]
    for label, row in folds["per_label"].items():
        values = [s["per_label"][label]["f1"] for s in folds["scores"] if label in s["per_label"]]
        assert row["mean"]["f1"] == pytest.approx(statistics.fmean(values))
    assert folds["sd"]["f1"] == pytest.approx(statistics.stdev(s["f1"] for s in folds["scores"]))
    history = read_history(tmp_path / "m")
    assert [r.name for r in history.runs] == ["fold 1", "fold 2"] and history.kept_run == folds["kept"]
    assert history.final_scores == outcome.test_scores
    # the saved model is the kept fold's: it scores what that fold scored
    assert SequenceLabeler.load(tmp_path / "m").evaluate(corpus)["f1"] == pytest.approx(outcome.labeler.evaluate(corpus)["f1"])


def test_seq_train_eval_fold_count_prints_mean_and_sd(tiny_grobid: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    metrics = tmp_path / "metrics.json"
    code = main(["seq", "train-eval", "--train", str(tiny_grobid), "--fold-count", "2", "--max-epoch", "1",
                 "--batch-size", "8", "--metrics-json", str(metrics)])
    assert code == 0
    out = capsys.readouterr().out
    assert "n-fold: 2 folds, scores on test, mean ± sd" in out and "micro avg" in out and "(saved)" in out
    document = json.loads(metrics.read_text())
    assert document["n_sequences"] == 4 and len(document["folds"]["scores"]) == 2


@pytest.mark.parametrize("options, message", [
    (["--incremental"], "needs --input-model"),
    (["--input-model", "x"], "add --incremental"),
    (["--incremental", "--input-model", "x", "--fold-count", "2"], "cannot be combined"),
])
def test_incompatible_run_options_are_refused(tiny_grobid: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                              options: list[str], message: str) -> None:
    assert main(["seq", "train", "--train", str(tiny_grobid), "--output", str(tmp_path / "m"), *options]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture(scope="module")
def base_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("incremental")
    data = write_tiny_grobid(root / "old.train", n=32)
    labeler = train_sequence_labeler(str(data), architecture="BidLSTM_CRF_FEATURES", output=root / "base",
                                     max_epoch=8, batch_size=8, learning_rate=0.02, early_stop=False, seed=1, **SMALL)
    assert labeler.evaluate(data)["f1"] > 0.9
    return root / "base", data


def test_growing_keeps_every_old_weight(base_model: tuple[Path, Path], tmp_path: Path) -> None:
    base, old_data = base_model
    labeler = SequenceLabeler.load(base)
    old_state = {k: v.clone() for k, v in labeler.model.state_dict().items()}
    old_chars, old_labels = list(labeler.encoder.chars.items), list(labeler.encoder.labels.items)
    new = read_labelled(write_weekday_dates(tmp_path / "new.train"))
    added = prepare_incremental(labeler, new.sequences)
    assert added["labels"] == 1 and added["chars"] >= 1  # B-<weekday>; "ä" and weekday letters
    assert labeler.encoder.labels.items == [*old_labels, "B-<weekday>"]
    assert labeler.encoder.chars.items[: len(old_chars)] == old_chars
    state = labeler.model.state_dict()
    for key, old in old_state.items():
        assert state[key][tuple(slice(0, n) for n in old.shape)].equal(old), key
    assert state["head.crf.transitions"].shape == (len(old_labels) + 1,) * 2
    assert state["embedders.0.embedding.weight"].shape[0] == len(labeler.encoder.chars)


def test_growing_for_new_characters_only_changes_no_old_prediction(base_model: tuple[Path, Path], tmp_path: Path) -> None:
    base, old_data = base_model
    labeler = SequenceLabeler.load(base)
    old_sequences = read_labelled(old_data).sequences
    before = labeler.predict(old_sequences)
    extra = tmp_path / "umlaut.train"
    extra.write_text("März märz LINESTART INITCAP NOPUNCT I-<month>\n2001 2001 LINEEND NOCAPS NOPUNCT I-<year>\n\n")
    added = prepare_incremental(labeler, read_labelled(extra).sequences)
    assert added == {"chars": 2, "labels": 0, "features": 0}  # "M" is known; "ä" and "z" are new
    after = labeler.predict(old_sequences)
    assert [p.labels for p in after] == [p.labels for p in before]
    assert [p.scores for p in after] == [p.scores for p in before]


def test_incremental_training_learns_new_labels_and_keeps_old_ones(base_model: tuple[Path, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    base, old_data = base_model
    new = write_weekday_dates(tmp_path / "new.train")
    code = main(["seq", "train", "--train", str(new), "--output", str(tmp_path / "grown"), "--incremental",
                 "--input-model", str(base), "--max-epoch", "8", "--batch-size", "8", "--learning-rate", "0.02",
                 "--early-stop", "false", "--seed", "1"])
    assert code == 0
    grown = SequenceLabeler.load(tmp_path / "grown")
    assert grown.model_config.word_hidden == 16  # the input model's network, not the command line's defaults
    new_scores = grown.evaluate(new)
    assert new_scores["per_label"]["<weekday>"]["f1"] > 0.9
    assert grown.evaluate(old_data)["f1"] > 0.7  # old dates still tagged (the new data has them too)
    history = read_history(tmp_path / "grown")
    assert [r.name for r in history.runs] == ["train", "incremental"] and history.runs[1].continues
    assert len(history.runs[1].epochs) == 8


def test_incremental_refuses_data_of_another_shape(base_model: tuple[Path, Path], tiny_conll: Path) -> None:
    base, _ = base_model
    with pytest.raises(ConfigError, match="trained on grobid data"):
        train_corpora(read_labelled(tiny_conll), None, ModelConfig(), TrainConfig(max_epoch=1), DataConfig(),
                      input_model=str(base))
    other = tiny_conll.parent / "wide.train"
    other.write_text("June june x LINESTART INITCAP NOPUNCT I-<month>\n\n")
    with pytest.raises(DataError, match="5 feature columns, but"):
        train_corpora(read_labelled(other), None, ModelConfig(), TrainConfig(max_epoch=1, early_stop=False), DataConfig(),
                      input_model=str(base))
