"""GROBID's own training files, read as DeLFT reads them: continuation openers and ragged columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.grobid_files import grobid_line as _line
from tests.grobid_files import ragged_file
from textorch.cli.main import main
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.features import (
    parse_columns,
    require_feature_columns,
    select_feature_columns,
)
from textorch.data.readers import read_grobid
from textorch.data.tags import normalize_to_iob2
from textorch.data.validate import WARNING, check_file
from textorch.errors import ConfigError, DataError


def test_fields_opened_by_a_continuation_are_one_warning_and_read_as_the_field_start(tmp_path: Path) -> None:
    # GROBID's trainers drop a field's first token when their alignment cannot match it: the field
    # then opens with its continuation label, at a sequence's start (5 here) or after a token of
    # another field (line 17: <y> after an <x> token, as header's <author> after a <pubnum>)
    text = "".join(f"fig{i} <figDesc>\ntext{i} <figDesc>\n\n" for i in range(5)) + "a I-<x>\nb <y>\nc <y>\n"
    path = tmp_path / "figure.train"
    path.write_text(text, encoding="utf-8")
    check = check_file(path)
    assert check.errors == []
    (warning,) = check.problems
    assert warning.severity == WARNING and warning.line == 1
    assert warning.message.startswith("6 fields open with a continuation label, no I- label before "
                                      f"({path}:1, {path}:4, {path}:7 and 3 more)")
    assert check.corpus.sequences[0].labels == ["I-<figDesc>", "I-<figDesc>"]  # DeLFT's reading
    assert check.corpus.sequences[5].labels == ["B-<x>", "I-<y>", "I-<y>"]
    # every IOB2 reader (the scorer, a CRF that forbids invalid moves) reads line 17 as a new <y> field
    assert normalize_to_iob2(check.corpus.sequences[5].labels) == ["B-<x>", "B-<y>", "I-<y>"]


def test_a_label_outside_grobids_form_stays_an_error(tmp_path: Path) -> None:
    path = tmp_path / "header.train"
    path.write_text("a I-<x>\nb y>\n\nc <x\n", encoding="utf-8")
    assert [(p.line, p.severity) for p in check_file(path).problems] == [(2, "error"), (4, "error")]


def test_sequences_with_other_column_counts_are_one_warning(tmp_path: Path) -> None:
    path = ragged_file(tmp_path / "date.train", widths=(5, 5, 6))
    check = check_file(path)
    assert check.errors == []
    (warning,) = check.problems
    assert warning.severity == WARNING and warning.line == 9
    assert warning.message.startswith("4 sequences with 8 fields where most have 7 (")
    corpus = read_grobid(path)
    assert corpus.n_features == 6 and corpus.extra["common_features"] == 5
    assert [len(s.features[0]) for s in corpus.sequences[:3]] == [5, 5, 6]


def test_a_line_off_its_sequence_count_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.train"
    path.write_text(f"{_line('a', 5, 'I-<x>')}\n{_line('b', 5, '<x>')}\n\n"
                    f"{_line('c', 6, 'I-<x>')}\n{_line('d', 5, '<x>')}\n", encoding="utf-8")
    errors = [str(p) for p in check_file(path).errors]
    assert errors == [f"{path}:5: error: expected 8 fields (as on line 4, the first of this sequence), found 7"]
    with pytest.raises(DataError, match="expected 8 fields"):
        read_grobid(path)


def test_detected_columns_are_among_those_every_sequence_has(tmp_path: Path) -> None:
    corpus = read_grobid(ragged_file(tmp_path / "date.train"))
    # column 0 (lower-cased token) has too many values for DeLFT's vocabulary size of 12; 5 is
    # small but only every other sequence has it
    assert select_feature_columns(corpus.sequences, corpus.n_features, 12) == [1, 2, 3, 4]


def test_a_named_column_some_sequence_lacks_is_one_error_or_skipped(tmp_path: Path) -> None:
    corpus = read_grobid(ragged_file(tmp_path / "date.train"))
    assert require_feature_columns(corpus, "1-4") is corpus
    with pytest.raises(DataError) as info:
        require_feature_columns(corpus, "1-5")
    assert str(info.value).startswith(f"{corpus.path}:1: 6 sequence(s) have fewer than the 6 feature columns")
    kept = require_feature_columns(corpus, "1-5", skip_bad_sequences=True)
    assert len(kept) == 6 and all(len(s.features[0]) == 6 for s in kept.sequences)
    with pytest.raises(ConfigError, match=r"column\(s\) \[6\] out of range"):
        parse_columns("6", corpus.n_features)


def test_features_of_empty_sequences_do_not_narrow_the_choice() -> None:
    sequences = [TokenSequence(["a"], features=[["x", "y"]]), TokenSequence([], features=[])]
    assert select_feature_columns(Corpus(sequences, "grobid", n_features=2).sequences, 2) == [0, 1]


def test_seq_validate_reports_both_cases_as_warnings(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = ragged_file(tmp_path / "date.train")
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n" + _line("May", 6, "<month>") + "\n")
    assert main(["seq", "validate", "--train", str(path), "--format", "grobid"]) == 0
    out = capsys.readouterr().out
    assert "OK: 0 errors, 2 warnings" in out
    assert "1 field opens with a continuation label" in out and "fields where most have" in out
