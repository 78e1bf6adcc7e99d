"""Data validation before training: every problem at file:line, a summary, refuse or skip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textorch.cli.main import main
from textorch.data.readers import read_labelled
from textorch.data.validate import ERROR, WARNING, check_file, validate_data
from textorch.data.checked_read import DataValidationError, format_report, read_validated
from textorch.errors import DataError

# line: problem
BAD_GROBID = (
    b"June june I-<month>\n"
    b"12 12 <day\n"                # 2: not a GROBID label
    b"2005 2005 I-<year>\n"
    b"\n"
    b"May may I-<month>\n"
    b"3 I-<day>\n"                 # 6: 2 fields where the file has 3
    b"\n"
    b"x\xff x I-<day>\n"           # 8: invalid UTF-8
    b"\n"
    b"a a B-<x>\n"                 # 10: not a GROBID label
    b"b\x00 b I-<x>\n"             # 11: NUL, a warning
    b"\n"
    b"1999 1999 I-<year>\n"
    b"\n"
    b"<other> tokens I-<other>\n"
    b"keep keep <other>\n"
)


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def _found(check) -> list[tuple[int | None, str]]:
    return [(p.line, p.severity) for p in check.problems]


def test_every_grobid_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.train", BAD_GROBID)
    check = check_file(path)
    assert check.format == "grobid"
    assert _found(check) == [(2, ERROR), (6, ERROR), (8, ERROR), (10, ERROR), (11, WARNING)]
    messages = [str(p) for p in check.problems]
    assert messages[0].startswith(f"{path}:2: error: invalid GROBID label '<day'")
    assert messages[1] == f"{path}:6: error: expected 3 fields (as on 10 of 11 token lines), found 2"
    assert messages[2] == f"{path}:8: error: invalid UTF-8 (byte 0xff at column 2)"
    assert "invalid GROBID label 'B-<x>'" in messages[3]
    assert "U+0000" in messages[4]
    summary = check.summary()
    assert (summary["n_sequences"], summary["n_tokens"], summary["n_bad_sequences"]) == (6, 11, 4)
    assert summary["length"] == {"min": 1, "mean": 1.83, "p95": 3, "max": 3}
    # labels are counted on what training would use: the two sequences without errors
    assert summary["labels"] == {"<year>": {"entities": 1, "tokens": 1}, "O": {"entities": 0, "tokens": 2}}


def test_outside_tokens_need_no_opener_and_a_field_after_them_may_open_with_its_continuation(tmp_path: Path) -> None:
    path = _write(tmp_path, "f.train", "a I-<other>\nb <month>\n\nc <other>\nd I-<day>\n")
    check = check_file(path)
    assert [str(p) for p in check.problems] == [
        f"{path}:2: warning: 1 field opens with a continuation label, no I- label before ({path}:2); "
        "each read as the start of its field, as a CRF reads it"]
    assert [s.labels for s in check.corpus.sequences] == [["O", "I-<month>"], ["O", "B-<day>"]]


def test_bad_sequences_are_left_out_with_their_line_numbers(tmp_path: Path) -> None:
    check = check_file(_write(tmp_path, "bad.train", BAD_GROBID))
    assert check.bad_sequences == {0, 1, 2, 3}
    assert [(s.line, s.tokens, s.labels) for s in check.corpus.sequences] == [
        (13, ["1999"], ["B-<year>"]),
        (15, ["<other>", "keep"], ["O", "O"]),
    ]


def test_clean_file_gives_the_readers_corpus(tiny_grobid: Path) -> None:
    check = check_file(tiny_grobid)
    assert check.problems == [] and check.bad_sequences == set()
    expected = read_labelled(tiny_grobid)
    assert [(s.line, s.tokens, s.labels, s.features) for s in check.corpus.sequences] == [
        (s.line, s.tokens, s.labels, s.features) for s in expected.sequences
    ]


def test_summary_of_a_conll_file(tiny_conll: Path) -> None:
    check = check_file(tiny_conll)
    assert (check.format, check.scheme, check.problems) == ("conll", "iob1", [])
    summary = check.summary()
    assert summary["n_sequences"] == 40 and summary["n_tokens"] == 200
    assert summary["length"] == {"min": 5, "mean": 5.0, "p95": 5, "max": 5}
    assert summary["labels"] == {"LOC": {"entities": 40, "tokens": 40}, "O": {"entities": 0, "tokens": 120},
                                 "PER": {"entities": 40, "tokens": 40}}


@pytest.mark.parametrize(
    ("text", "scheme", "expected"),
    [
        # IOB1: I- opens entities; B- only between two adjacent entities of one type
        ("a I-PER\nb I-PER\nc B-PER\nd O\n", "iob1", []),
        ("a B-PER\nb I-PER\nc O\nd B-LOC\n", "iob2", []),
        # IOB1 file with one B- after O: a warning at the rarer style, never an error
        ("a I-PER\nb O\n\nc I-LOC\nd O\n\ne B-LOC\n", "iob1", [(7, WARNING)]),
        # IOB2 file with one I- opener
        ("a B-PER\nb O\n\nc B-LOC\nd O\n\ne I-LOC\n", "iob2", [(7, WARNING)]),
        # IOBES: a continuation must follow B-/I- of its type
        ("a S-PER\nb I-PER\nc O\nd E-LOC\n\ne B-LOC\nf E-LOC\n", "iobes", [(2, ERROR), (4, ERROR)]),
    ],
)
def test_conll_schemes_and_openers(tmp_path: Path, text: str, scheme: str, expected: list) -> None:
    check = check_file(_write(tmp_path, "f.conll", text))
    assert check.scheme == scheme
    assert _found(check) == expected


def test_conll_columns_are_held_to_the_most_frequent_count(tmp_path: Path) -> None:
    # the reader would blame line 2 (it trusts the first line); the odd one out is line 1
    text = "a NN O\nb NN I-NP O\nc NN I-NP O\n\nd X-PER\n-DOCSTART- -X- O O\n\ne NN I-NP B-\n"
    check = check_file(_write(tmp_path, "f.conll", text))
    assert [(p.line, p.message) for p in check.problems] == [
        (1, "expected 4 columns (as on 3 of 5 token lines), found 3"),
        (5, "expected 4 columns (as on 3 of 5 token lines), found 2"),
        (8, "invalid tag 'B-': expected O or B-X, I-X, E-X, S-X (IOB1, IOB2 or IOBES)"),
    ]


def test_a_count_the_format_forbids_is_an_error_everywhere(tmp_path: Path) -> None:
    check = check_file(_write(tmp_path, "f.conll", "a b c d O\ne f g h O\n"))
    assert [p.message for p in check.problems] == ["expected 2 to 4 columns (token ... tag), found 5"] * 2
    assert len(check.corpus) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "no sequences: the file has no token line"),
        ("-DOCSTART- -X- O O\n\n", "no sequences: the file has no token line"),
        ("lonely\nwords here\n", "cannot detect the format"),
    ],
)
def test_whole_file_errors(tmp_path: Path, content: str, message: str) -> None:
    check = check_file(_write(tmp_path, "f.txt", content))
    assert check.fatal and check.corpus is None
    assert check.problems[-1].line is None and message in check.problems[-1].message


def test_unreadable_files_are_reported_not_raised(tmp_path: Path) -> None:
    report = validate_data(tmp_path / "absent.conll", valid=tmp_path)
    assert [str(p) for p in report.errors] == [f"{tmp_path / 'absent.conll'}: error: file not found",
                                               f"{tmp_path}: error: not a regular file"]


def test_empty_documents_are_warnings_and_long_sequences_one_note(tmp_path: Path) -> None:
    text = ("-DOCSTART- -X- O O\n\n-DOCSTART- -X- O O\n\n" + "".join(f"w{i} O\n" for i in range(7)) + "\nx O\n\n"
            + "".join(f"v{i} O\n" for i in range(6)))
    path = _write(tmp_path, "f.conll", text)
    check = check_file(path, max_sequence_length=5)
    assert [(p.line, p.severity, p.message) for p in check.problems] == [(1, WARNING, "document with no sequence")]
    assert check.long_lines == [5, 15] and check.summary()["n_longer_than_max"] == 2
    assert check.long_sequences_note() == (
        f"{path}: 2 sequences longer than 5 tokens (longest 7; {path}:5, {path}:15): training reads them in "
        "consecutive pieces of at most 5 tokens, every token kept; tagging reads whole sequences")
    assert check_file(path).long_sequences_note() is None  # no maximum: nothing is long


def test_valid_and_test_files_use_the_training_format(tmp_path: Path, tiny_conll: Path) -> None:
    valid = _write(tmp_path, "valid.txt", "Bob I-PER\nin O\nNice I-CITY\n")
    test = _write(tmp_path, "test.txt", "x I-<x>\n")  # GROBID label in a CoNLL run
    report = validate_data(tiny_conll, valid, test)
    assert [(c.role, c.format) for c in report.files] == [("train", "conll"), ("valid", "conll"), ("test", "conll")]
    assert [str(p) for p in report.file("valid").problems] == [
        f"{valid}: warning: label 'CITY' (1 entities) never occurs in the training file: the model cannot predict it"]
    assert [str(p) for p in report.file("test").problems] == [
        f"{test}:1: error: 'I-<x>' is a GROBID label but the data was detected as CoNLL (from most labels); "
        "pass --format if that is right"]


def test_read_validated_refuses_then_skips(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path, "bad.train", BAD_GROBID)
    with pytest.raises(DataValidationError) as info:
        read_validated(path, None, None, None)
    message = str(info.value)
    assert message.splitlines()[0] == ("4 errors in the data (in 4 sequences); fix them, or pass "
                                       "--skip-bad-sequences to train without those sequences:")
    assert [line.split(": ")[0] for line in message.splitlines()[1:]] == [f"  {path}:{n}" for n in (2, 6, 8, 10)]
    with caplog.at_level("WARNING", logger="textorch"):
        train, valid, test = read_validated(path, None, None, None, skip_bad_sequences=True)
    assert len(train) == 2 and valid is None and test is None
    assert f"{path}: skipped 4 of 6 sequences with errors" in caplog.text


def test_whole_file_errors_cannot_be_skipped(tmp_path: Path) -> None:
    empty = _write(tmp_path, "e.conll", "\n")
    with pytest.raises(DataError) as info:  # alone, it is said on one line, as the readers say it
        read_validated(empty, None, None, None, skip_bad_sequences=True)
    assert str(info.value) == f"{empty}: no sequences: the file has no token line"
    bad = _write(tmp_path, "bad.train", BAD_GROBID)
    with pytest.raises(DataValidationError) as listed:
        read_validated(bad, empty, None, None, skip_bad_sequences=True)
    assert str(listed.value).startswith("5 errors in the data:")


def test_error_listing_is_capped(tmp_path: Path) -> None:
    path = _write(tmp_path, "many.conll", "".join(f"w{i} NOPE\n" for i in range(70)))
    report = validate_data(path, format="conll")
    assert len(report.errors) == 70
    lines = str(DataValidationError(report)).splitlines()
    assert len(lines) == 1 + 50 + 1 and lines[-1] == "  ... and 20 more"
    text = format_report(report, limit=10)
    assert text.count(": error: invalid tag") == 10 and "... and 60 more (use --max-problems 0" in text
    assert text.endswith("FAILED: 70 errors, 0 warnings")


# ----------------------------------------------------------------------------- CLI


def test_cli_validate_lists_problems_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, "bad.train", BAD_GROBID)
    report = tmp_path / "report.json"
    assert main(["seq", "validate", "--train", str(path), "--json", str(report)]) == 2
    out = capsys.readouterr().out
    for line in (2, 6, 8, 10):
        assert f"{path}:{line}: error: " in out
    assert f"{path}:11: warning: " in out and out.rstrip().endswith("FAILED: 4 errors, 1 warning")
    data = json.loads(report.read_text())
    assert [p["line"] for p in data["problems"]] == [2, 6, 8, 10, 11]
    assert data["files"][0]["n_bad_sequences"] == 4


def test_cli_validate_clean_data_exits_0(tiny_conll: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["seq", "validate", "--train", str(tiny_conll), "--valid", str(tiny_conll)]) == 0
    out = capsys.readouterr().out
    assert "conll (iob1), 40 sequences, 200 tokens" in out and out.rstrip().endswith("OK: 0 errors, 0 warnings")


def test_training_refuses_bad_data_before_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, "bad.train", BAD_GROBID)
    assert main(["seq", "train", "--train", str(path), "--output", str(tmp_path / "m"), "--max-epoch", "1"]) == 2
    err = capsys.readouterr().err
    assert "4 errors in the data" in err and all(f"{path}:{n}: error" in err for n in (2, 6, 8, 10))
    assert not (tmp_path / "m").exists()


def test_training_skips_bad_sequences_when_told(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _write(tmp_path, "bad.train", BAD_GROBID)
    args = ["seq", "train", "--train", str(path), "--output", str(tmp_path / "m"), "--max-epoch", "1",
            "--early-stop", "false", "--skip-bad-sequences"]
    assert main(args) == 0
    assert f"{path}: skipped 4 of 6 sequences with errors" in capsys.readouterr().err
    assert (tmp_path / "m" / "config.json").is_file()


# ----------------------------------------------------------------------------- agreement with the reader

_LINES = st.sampled_from([
    "a O", "b B-PER", "c I-PER", "d E-PER", "e S-LOC", "f NN O", "g NN I-LOC", "h X-PER", "lonely",
    "x I-<x>", "y <x>", "z <y>", "w f I-<other>", "v <other>", "-DOCSTART- -X- O O", "", " ", "a\x00 O",
])


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(_LINES, max_size=12), st.sampled_from([None, "conll", "grobid"]))
def test_validation_agrees_with_the_reader(tmp_path_factory: pytest.TempPathFactory, lines: list[str],
                                           fmt: str | None) -> None:
    """No error found means the reader accepts the file and reads the same sequences; a file the
    reader refuses always has an error; the corpus of the good sequences never fails to parse."""
    path = tmp_path_factory.mktemp("agree") / "f.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check = check_file(path, format=fmt)
    try:
        corpus = read_labelled(path, fmt)
    except DataError:
        assert check.errors
        return
    if not check.errors:
        assert [(s.line, s.tokens, s.labels) for s in check.corpus.sequences] == [
            (s.line, s.tokens, s.labels) for s in corpus.sequences]
