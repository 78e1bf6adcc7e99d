"""``textorch grobid MODEL train`` on GROBID files as GROBID writes them, which DeLFT trains on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.grobid_files import ragged_file
from textorch.cli.main import main


def _train(data: Path, model: Path, architecture: str, *options: str) -> int:
    return main(["grobid", "date", "train", "--input", str(data), "--output", str(model), "--architecture", architecture,
                 "--max-epoch", "1", "--early-stop", "false", "--batch-size", "4", *options])


def test_a_model_without_features_trains_on_ragged_columns(tmp_path: Path) -> None:
    assert _train(ragged_file(tmp_path / "date.train"), tmp_path / "m", "BidLSTM_CRF") == 0


def test_a_features_model_takes_the_columns_every_sequence_has(tmp_path: Path) -> None:
    assert _train(ragged_file(tmp_path / "date.train"), tmp_path / "m", "BidLSTM_CRF_FEATURES") == 0
    vocab = json.loads((tmp_path / "m" / "vocab.json").read_text())
    assert vocab["feature_columns"] == [1, 2, 3, 4]


def test_six_feature_columns_train_where_the_fixed_date_columns_did_not(tmp_path: Path) -> None:
    data = ragged_file(tmp_path / "date.train", widths=(6,))
    assert _train(data, tmp_path / "m", "BidLSTM_CRF_FEATURES") == 0
    assert json.loads((tmp_path / "m" / "vocab.json").read_text())["feature_columns"] == [1, 2, 3, 4, 5]


def test_a_named_column_some_sequences_lack_stops_with_one_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = ragged_file(tmp_path / "date.train")
    assert _train(data, tmp_path / "m", "BidLSTM_CRF_FEATURES", "--features-indices", "1-5") == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert errors == [(f"textorch: error: {data}:1: 6 sequence(s) have fewer than the 6 feature columns that feature "
                       "columns 1-5 need (the first has 5); name columns they all have, or pass --skip-bad-sequences "
                       "to train without them")]
    assert _train(data, tmp_path / "m", "BidLSTM_CRF_FEATURES", "--feature-columns", "1-5", "--skip-bad-sequences") == 0


def test_sequences_opened_by_a_continuation_train(tmp_path: Path) -> None:
    data = tmp_path / "date.train"
    data.write_text("".join(f"June <month>\n{i + 1} I-<day>\n\n" for i in range(8)), encoding="utf-8")
    assert _train(data, tmp_path / "m", "BidLSTM_CRF") == 0


def test_seq_train_holds_named_columns_to_the_same_rule(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = ragged_file(tmp_path / "date.train")
    common = ["seq", "train", "--train", str(data), "--max-epoch", "1", "--early-stop", "false", "--feature-columns", "1-5"]
    assert main([*common, "--output", str(tmp_path / "a"), "--architecture", "BidLSTM_CRF_FEATURES"]) == 2
    assert "6 sequence(s) have fewer than the 6 feature columns" in capsys.readouterr().err
    # a model without features never looks at feature columns, named or not
    assert main([*common, "--output", str(tmp_path / "b"), "--architecture", "BidLSTM_CRF"]) == 0
    assert json.loads((tmp_path / "b" / "vocab.json").read_text())["feature_columns"] == []
