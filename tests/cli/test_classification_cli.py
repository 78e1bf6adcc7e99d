"""``textorch cls ...`` end to end (in process) and its error exits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tiny_classification import write_tiny_csv
from textorch.cli.main import main
from textorch.models.classifiers import CLS_ARCHITECTURES

FAST = ["--max-epoch", "2", "--batch-size", "8", "--learning-rate", "0.01", "--seed", "3",
        "--hidden", "8", "--dense-size", "8", "--word-dim", "8", "--architecture", "gru_simple"]
LEARN = ["--max-epoch", "8", "--learning-rate", "0.05", "--early-stop", "false", "--hidden", "16", "--word-dim", "16"]
"""Added to FAST where the scores are checked: enough for the keywords to be learnt whatever the
seed, where FAST's two epochs leave the model near chance, so that a floor on F1 means something."""



@pytest.fixture
def tiny_csv(tmp_path: Path) -> Path:
    return write_tiny_csv(tmp_path / "tiny.csv", n=40)


def _layout_ok(scores: dict) -> None:
    assert set(scores) == {"accuracy", "macro", "micro", "per_class"}
    for average in ("macro", "micro"):
        assert set(scores[average]) == {"precision", "recall", "f1"}
    for row in scores["per_class"].values():
        assert set(row) == {"precision", "recall", "f1", "support"}
        assert all(0.0 <= row[k] <= 1.0 for k in ("precision", "recall", "f1"))
    assert 0.0 <= scores["accuracy"] <= 1.0


def test_train_eval_eval_classify_round_trip(tiny_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model, metrics = tmp_path / "model", tmp_path / "metrics.json"
    assert main(["cls", "train-eval", "--train", str(tiny_csv), "--output", str(model), "--metrics-json", str(metrics),
                 *FAST, *LEARN]) == 0
    assert "macro avg" in capsys.readouterr().out
    scores = json.loads(metrics.read_text())
    _layout_ok(scores)
    assert sum(row["support"] for row in scores["per_class"].values()) == 4  # 10 % of 40 held out, stratified
    assert scores["accuracy"] >= 0.75, scores  # one of the 4 may go wrong; chance is 1 or 2

    evaluated = tmp_path / "eval.json"
    assert main(["cls", "eval", "--model", str(model), "--test", str(tiny_csv), "--metrics-json", str(evaluated)]) == 0
    scores = json.loads(evaluated.read_text())
    _layout_ok(scores)
    assert sum(row["support"] for row in scores["per_class"].values()) == 40
    assert scores["macro"]["f1"] >= 0.9 and scores["accuracy"] >= 0.9, scores

    texts = tmp_path / "texts.txt"
    texts.write_text("this is excellent .\nawful table\n", encoding="utf-8")
    out = tmp_path / "classified.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(texts), "--output", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["classes"] == ["negative", "neutral", "positive"]
    records = document["classifications"]
    assert [r["text"] for r in records] == ["this is excellent .", "awful table"] and [r["line"] for r in records] == [1, 2]
    for record in records:
        assert sum(record["scores"].values()) == pytest.approx(1.0, abs=1e-5)
        assert record["labels"] == [max(record["scores"], key=record["scores"].get)]
    # a CSV input is read with the model's text column; its labels are ignored
    assert main(["cls", "classify", "--model", str(model), "--input", str(tiny_csv), "--output", str(out)]) == 0
    records = json.loads(out.read_text())["classifications"]
    assert len(records) == 40
    # eval's accuracy is that of the labels classify gives, exactly
    gold = [line.rsplit(",", 1)[1] for line in tiny_csv.read_text(encoding="utf-8").splitlines()[1:]]
    assert scores["accuracy"] == sum(r["labels"] == [g] for r, g in zip(records, gold)) / 40


def test_fold_count_reports_folds_and_saves_one_ensemble(tiny_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model, metrics = tmp_path / "model", tmp_path / "metrics.json"
    code = main(["cls", "train-eval", "--train", str(tiny_csv), "--output", str(model), "--metrics-json", str(metrics),
                 "--fold-count", "2", *FAST, *LEARN])
    assert code == 0
    out = capsys.readouterr().out
    assert "per-fold scores (on the test)" in out and "ensemble" in out
    document = json.loads(metrics.read_text())
    folds = document.pop("folds")
    _layout_ok(document)
    assert len(folds["scores"]) == 2 and set(folds["mean"]) == {"accuracy", "macro_f1", "micro_f1"}
    assert folds["mean"]["accuracy"] == pytest.approx(sum(s["accuracy"] for s in folds["scores"]) / 2)
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
    assert json.loads((model / "config.json").read_text())["model"]["fold_count"] == 2
    # Each member learns from half of the data: the ensemble on the whole file, most of which it saw,
    # is held to a floor that a model at chance (macro F1 near 1/3) misses.
    evaluated = tmp_path / "eval.json"
    assert main(["cls", "eval", "--model", str(model), "--test", str(tiny_csv), "--metrics-json", str(evaluated)]) == 0
    assert json.loads(evaluated.read_text())["macro"]["f1"] >= 0.75


def test_licence_layout_carries_over_to_eval_and_classify(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rows = [f'"This work is under {lic} terms, number {i}",{owner},{lic}' for i in range(24)
            for owner, lic in [(("authors", "CC-BY"), ("publisher", "copyright"))[i % 2]]]
    data = tmp_path / "licences.csv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")  # no header row, as the shared file
    model = tmp_path / "model"
    args = ["cls", "train", "--train", str(data), "--format", "licenses", "--label-column", "copyright_owner", "--output", str(model)]
    assert main([*args, *FAST, "--max-epoch", "1"]) == 0
    metrics = tmp_path / "m.json"
    assert main(["cls", "eval", "--model", str(model), "--test", str(data), "--metrics-json", str(metrics)]) == 0
    scores = json.loads(metrics.read_text())
    assert sorted(scores["per_class"]) == ["authors", "publisher"]
    assert sum(r["support"] for r in scores["per_class"].values()) == 24  # the first line is a record
    out = tmp_path / "c.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(data), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["classifications"][0]["text"].startswith("This work is under CC-BY")


def test_architectures_lists_every_name(capsys: pytest.CaptureFixture) -> None:
    assert main(["cls", "architectures"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == list(CLS_ARCHITECTURES)
    assert len(CLS_ARCHITECTURES) == 11


def test_missing_column_exits_2_with_file_and_line(tiny_csv: Path, tmp_path: Path, run_cli) -> None:
    result = run_cli(["cls", "train", "--train", str(tiny_csv), "--output", str(tmp_path / "m"), "--label-column", "sentiment"])
    assert result.returncode == 2
    assert f"{tiny_csv}:1: no label column 'sentiment'; the header has: text, label" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "m").exists()


def test_empty_text_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\ngood,positive\n\"  \",negative\n", encoding="utf-8")
    assert main(["cls", "train", "--train", str(bad), "--output", str(tmp_path / "m"), *FAST]) == 2
    assert f"{bad}:3: empty text" in capsys.readouterr().err


def test_unknown_label_at_eval_exits_2(tiny_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "model"
    assert main(["cls", "train", "--train", str(tiny_csv), "--output", str(model), *FAST, "--max-epoch", "1"]) == 0
    test = tmp_path / "test.csv"
    test.write_text("text,label\ngood,positive\nodd,sarcastic\n", encoding="utf-8")
    assert main(["cls", "eval", "--model", str(model), "--test", str(test)]) == 2
    err = capsys.readouterr().err
    assert f"{test}:3: unknown label 'sarcastic'" in err and "negative, neutral, positive" in err


def test_bad_options_exit_2(tiny_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "m")
    assert main(["cls", "train", "--train", str(tiny_csv), "--output", out, "--class-weights", "nope=3"]) == 2
    assert "--class-weights" in capsys.readouterr().err
    assert main(["cls", "train", "--train", str(tiny_csv), "--output", out, "--fold-count", "0"]) == 2
    assert "--fold-count must be >= 1" in capsys.readouterr().err
    assert main(["cls", "train", "--train", str(tiny_csv), "--output", out, "--architecture", "bert"]) == 2
    assert "--transformer" in capsys.readouterr().err
    assert main(["cls", "train", "--train", str(tiny_csv), "--valid", str(tiny_csv), "--output", out, "--fold-count", "2"]) == 2
    assert "--valid cannot be used with --fold-count" in capsys.readouterr().err
    assert main(["cls", "eval", "--model", str(tmp_path / "absent"), "--test", str(tiny_csv)]) == 2
    assert "absent" in capsys.readouterr().err


def test_an_unknown_architecture_in_a_saved_model_names_its_config_file(tiny_csv: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    """Before: ``unknown architecture 'nosuch'; choose one of: ...``, which named no file (#52)."""
    model = tmp_path / "model"
    assert main(["cls", "train", "--train", str(tiny_csv), "--output", str(model), *FAST, "--max-epoch", "1"]) == 0
    config = json.loads((model / "config.json").read_text())
    config["model"]["architecture"] = "nosuch"
    (model / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    assert main(["cls", "classify", "--model", str(model), "--input", str(tiny_csv)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == f"textorch: error: {model / 'config.json'}: unknown architecture 'nosuch'; choose one of: " \
                          f"{', '.join(CLS_ARCHITECTURES)}", err
