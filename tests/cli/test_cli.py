"""The ``textorch`` command end to end (in process) and its error exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from textorch.cli.main import main
from textorch.data.readers import read_conll
from textorch.tagging.labeler import SequenceLabeler

FAST = ["--max-epoch", "2", "--batch-size", "8", "--learning-rate", "0.01", "--seed", "3"]


def test_train_eval_tag_round_trip(tiny_grobid: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "model"
    metrics = tmp_path / "metrics.json"
    code = main(["seq", "train-eval", "--train", str(tiny_grobid), "--output", str(model), "--metrics-json", str(metrics), *FAST])
    assert code == 0
    out = capsys.readouterr().out
    assert "precision" in out and "micro avg" in out
    scores = json.loads(metrics.read_text())
    assert set(scores) >= {"f1", "precision", "recall", "per_label", "n_sequences", "n_tokens"}
    assert 0.0 <= scores["f1"] <= 1.0
    # Floors that a model which learnt nothing (or a metric stuck at 0) misses, with room for other
    # seeds: two epochs learn these dates; the held-out 4 sequences let one entity go wrong.
    assert scores["f1"] >= 0.6, scores
    assert scores["n_sequences"] == 4  # 10% of 40 held out as test

    assert main(["seq", "eval", "--model", str(model), "--test", str(tiny_grobid), "--metrics-json", str(tmp_path / "e.json")]) == 0
    evaluated = json.loads((tmp_path / "e.json").read_text())
    assert evaluated["n_sequences"] == 40
    assert evaluated["f1"] >= 0.9, evaluated

    tagged = tmp_path / "tagged.txt"
    stats = tmp_path / "stats.json"
    code = main(["seq", "tag", "--model", str(model), "--input", str(tiny_grobid), "--input-format", "grobid",
                 "--output", str(tagged), "--stats-json", str(stats)])
    assert code == 0
    in_lines = [l for l in tiny_grobid.read_text().splitlines() if l.strip()]
    out_lines = [l for l in tagged.read_text().splitlines() if l.strip()]
    assert len(in_lines) == len(out_lines)
    # token and features unchanged, the label column replaced by a GROBID-style prediction
    for source, result in zip(in_lines, out_lines):
        assert source.split()[:-1] == result.split()[:-1]
        assert result.split()[-1].endswith(">")
    st = json.loads(stats.read_text())
    assert st["n_sequences"] == 40 and st["n_tokens"] == len(in_lines)
    assert st["tag_s"] > 0 and st["tokens_per_s"] > 0 and st["load_s"] > 0


def test_tag_text_writes_delft_json(tiny_conll: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    assert main(["seq", "train", "--train", str(tiny_conll), "--output", str(model), *FAST, "--max-epoch", "8"]) == 0
    text = tmp_path / "in.txt"
    text.write_text("Mary lives in Rome.\n\nPeter lives in Berlin .\n", encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(out)]) == 0
    document = json.loads(out.read_text())
    assert set(document) >= {"software", "model", "date", "runtime", "texts"}
    assert [t["text"] for t in document["texts"]] == ["Mary lives in Rome.", "", "Peter lives in Berlin ."]
    assert document["texts"][1]["entities"] == []
    for record in document["texts"]:
        for entity in record["entities"]:
            assert record["text"][entity["beginOffset"] : entity["endOffset"]] == entity["text"]
            assert 0.0 <= entity["score"] <= 1.0
            assert entity["class"] in {"PER", "LOC"}


def test_tag_conll_tokens_only(tiny_conll: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    assert main(["seq", "train", "--train", str(tiny_conll), "--output", str(model), *FAST, "--max-epoch", "1"]) == 0
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("Anna\nlives\nin\nParis\n\nJohn\n", encoding="utf-8")
    out = tmp_path / "out.conll"
    assert main(["seq", "tag", "--model", str(model), "--input", str(tokens), "--input-format", "conll", "--output", str(out)]) == 0
    rows = [l.split() for l in out.read_text().splitlines() if l.strip()]
    assert [r[0] for r in rows] == ["Anna", "lives", "in", "Paris", "John"]
    assert all(len(r) == 2 and (r[1] == "O" or r[1][:2] in ("B-", "I-")) for r in rows)
    # CoNLL output tags without confidences (no forward-backward pass): the same labels
    labeler = SequenceLabeler.load(model)
    with_scores = labeler.predict(read_conll(str(tokens), labelled=False).sequences)
    assert [r[1] for r in rows] == [label for p in with_scores for label in p.labels]


def test_unknown_architecture_names_the_choices(tiny_conll: Path, tmp_path: Path, run_cli) -> None:
    result = run_cli(["seq", "train", "--train", str(tiny_conll), "--output", str(tmp_path / "m"), "--architecture", "Nope"])
    assert result.returncode == 2
    assert "BidLSTM_CRF" in result.stderr and "Nope" in result.stderr


def test_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    # a real process, once: the exit status and stderr of `python -m textorch.cli.main` itself
    result = subprocess.run([sys.executable, "-m", "textorch.cli.main", "seq", "train", "--train",
                             str(tmp_path / "absent.train"), "--output", str(tmp_path / "m")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "absent.train" in result.stderr and "not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_data_names_file_and_line(tmp_path: Path, run_cli) -> None:
    bad = tmp_path / "bad.train"
    bad.write_text("June june I-<month>\n12 12 I-<day>\n2005 I-<year>\n", encoding="utf-8")
    result = run_cli(["seq", "train", "--train", str(bad), "--output", str(tmp_path / "m")])
    assert result.returncode == 2
    assert f"{bad}:3:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "m").exists()


def test_bad_option_value_exit_2(tiny_conll: Path, tmp_path: Path, run_cli) -> None:
    result = run_cli(["seq", "train", "--train", str(tiny_conll), "--output", str(tmp_path / "m"), "--batch-size", "0"])
    assert result.returncode == 2 and "--batch-size" in result.stderr


def test_bucket_batches_below_one_exits_2_and_writes_nothing(
    tiny_conll: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["seq", "train", "--train", str(tiny_conll), "--output", str(tmp_path / "m"), "--bucket-batches", "0"]) == 2
    err = capsys.readouterr().err
    assert "--bucket-batches must be >= 1, got 0" in err and "Traceback" not in err
    assert not (tmp_path / "m").exists()


def test_missing_model_directory(tmp_path: Path, run_cli) -> None:
    text = tmp_path / "in.txt"
    text.write_text("hello\n")
    result = run_cli(["seq", "tag", "--model", str(tmp_path / "nomodel"), "--input", str(text)])
    assert result.returncode == 2 and "nomodel" in result.stderr and "Traceback" not in result.stderr


def test_architectures_lists_names(capsys: pytest.CaptureFixture) -> None:
    assert main(["seq", "architectures"]) == 0
    out = capsys.readouterr().out
    for name in ("BidLSTM_CRF", "BidGRU_CRF", "BidLSTM_CRF_FEATURES", "BidLSTM_CNN_CRF"):
        assert name in out
