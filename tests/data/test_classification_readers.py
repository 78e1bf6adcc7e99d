"""Classification readers: formats, columns, multi-label, the shared corpora, errors at file:line, splits."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from conftest import require_shared
from textorch.data.cls_readers import (
    ClsCorpus,
    ClsExample,
    detect_format,
    read_cls,
)
from textorch.data.splits import stratified_folds, stratified_holdout
from textorch.errors import ConfigError, DataError


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_header_quotes_and_named_columns(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.csv", 'id,body,y\n1,"a text, with comma",pos\n2,"multi\nline",neg\n\n3,plain,pos\n')
    corpus = read_cls(path, text_column="body", label_columns=["y"])
    assert [e.text for e in corpus.examples] == ["a text, with comma", "multi\nline", "plain"]
    assert [e.labels for e in corpus.examples] == [("pos",), ("neg",), ("pos",)]
    assert [e.line for e in corpus.examples] == [2, 3, 6]  # a record starts where its first line is
    assert corpus.format == "csv" and not corpus.multi_label and corpus.label_set() == ["neg", "pos"]


def test_tsv_keeps_quotes_and_columns_by_index_without_header(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.tsv", 'x\t"quoted" text with a lone " quote\n')
    corpus = read_cls(path, header=False, text_column="1", label_columns=["0"])
    assert corpus.examples[0].text == '"quoted" text with a lone " quote'
    assert corpus.examples[0].labels == ("x",)


def test_defaults_without_header_are_first_and_last_column(tmp_path: Path) -> None:
    corpus = read_cls(_write(tmp_path / "d.csv", "hello,ignored,lab\n"), header=False)
    assert (corpus.examples[0].text, corpus.examples[0].labels) == ("hello", ("lab",))


def test_multi_label_indicator_columns(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.csv", "text,toxic,insult\nt1,1,0\nt2,0,0\nt3,1,1\n")
    corpus = read_cls(path, label_columns=["toxic", "insult"])
    assert corpus.multi_label and corpus.classes == ["toxic", "insult"]
    assert [e.labels for e in corpus.examples] == [("toxic",), (), ("toxic", "insult")]
    bad = _write(tmp_path / "bad.csv", "text,toxic,insult\nt1,1,maybe\n")
    with pytest.raises(DataError, match=r"bad\.csv:2: .*'insult' holds 'maybe'"):
        read_cls(bad, label_columns=["toxic", "insult"])


def test_jsonl_single_list_and_indicator_labels(tmp_path: Path) -> None:
    single = _write(tmp_path / "s.jsonl", json.dumps({"text": "a", "label": "x"}) + "\n\n" + json.dumps({"text": "b", "label": 3}) + "\n")
    corpus = read_cls(single)
    assert [(e.labels, e.line) for e in corpus.examples] == [(("x",), 1), (("3",), 3)] and not corpus.multi_label
    lists = _write(tmp_path / "l.jsonl", json.dumps({"text": "a", "label": ["y", "x"]}) + "\n" + json.dumps({"text": "b", "label": []}) + "\n")
    corpus = read_cls(lists)
    assert corpus.multi_label and [e.labels for e in corpus.examples] == [("x", "y"), ()]
    flags = _write(tmp_path / "f.jsonl", json.dumps({"text": "a", "p": True, "q": 0}) + "\n")
    corpus = read_cls(flags, label_columns=["p", "q"])
    assert corpus.multi_label and corpus.classes == ["p", "q"] and corpus.examples[0].labels == ("p",)


@pytest.mark.parametrize(
    ("name", "content", "kwargs", "message"),
    [
        ("a.csv", "text,label\nx,a\n", {"label_columns": ["y"]}, r"a\.csv:1: no label column 'y'; the header has: text, label"),
        ("a.csv", "body,label\nx,a\n", {}, r"a\.csv:1: no text column 'text'"),
        ("a.csv", "text,label\nx,a\n   ,b\n", {}, r"a\.csv:3: empty text"),
        ("a.csv", "text,label\nx,a\ny\n", {}, r"a\.csv:3: 1 fields, expected 2"),
        ("a.csv", "text,label\nx,\n", {}, r"a\.csv:2: empty label"),
        ("a.csv", 'text,label\n"open quote,a\n', {}, r"a\.csv:2: malformed CSV"),
        ("a.jsonl", '{"text": "x", "label": "a"}\n{"text": "y"\n', {}, r"a\.jsonl:2: invalid JSON"),
        ("a.jsonl", '{"text": "x"}\n', {}, r"a\.jsonl:1: no label field 'label'; fields: text"),
        ("a.jsonl", '{"text": "", "label": "a"}\n', {}, r"a\.jsonl:1: empty text"),
        ("a.jsonl", '[1, 2]\n', {}, r"a\.jsonl:1: expected a JSON object"),
        ("c.txt", "# c\n\nA\tB\to\t\"x\"\nA\tB\tq\t\"y\"\n", {"format": "citation-sentiment"}, r"c\.txt:4: sentiment 'q'"),
        ("c.txt", "A\tB\to\n", {"format": "citation-sentiment"}, r"c\.txt:1: 3 tab-separated fields, expected 4"),
        ("l.csv", "text,owner\n", {"format": "licenses"}, r"l\.csv:1: 2 fields, expected 3"),
        ("e.csv", "text,label\n", {}, r"e\.csv: no records found"),
    ],
)
def test_bad_input_is_a_data_error_at_file_and_line(tmp_path: Path, name: str, content: str, kwargs: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        read_cls(_write(tmp_path / name, content), **kwargs)


def test_format_detection(tmp_path: Path) -> None:
    assert detect_format("x.csv") == "csv" and detect_format("x.TSV") == "tsv" and detect_format("x.jsonl.gz") == "jsonl"
    citations = _write(tmp_path / "c.txt", "# comment\n\nA00\tB00\tp\t\"good\"\n")
    assert detect_format(citations) == "citation-sentiment"
    plain = _write(tmp_path / "p.txt", "just text\n")
    assert detect_format(plain, labelled=False) == "text"
    with pytest.raises(ConfigError, match="--format"):
        detect_format(plain)
    corpus = read_cls(plain, labelled=False)
    assert corpus.examples[0].labels is None and corpus.examples[0].text == "just text"
    with pytest.raises(DataError, match=r"b\.txt:2: empty text"):
        read_cls(_write(tmp_path / "b.txt", "one\n\nthree\n"), labelled=False)


def test_unlabelled_reading_needs_no_label_column(tmp_path: Path) -> None:
    corpus = read_cls(_write(tmp_path / "u.csv", "text\nhello\n"), labelled=False)
    assert corpus.examples[0].text == "hello" and corpus.examples[0].labels is None


@pytest.mark.real_data
def test_citation_corpus_strips_only_real_quotes() -> None:
    path = require_shared("classification/citations/citation_sentiment_corpus.txt")
    corpus = read_cls(path)
    assert corpus.format == "citation-sentiment" and len(corpus) == 8736
    assert Counter(e.labels[0] for e in corpus.examples) == {"neutral": 7627, "positive": 829, "negative": 280}
    raw = path.read_text(encoding="utf-8").split("\n")
    unquoted = 0
    for example in corpus.examples:
        field = raw[example.line - 1].split("\t")[3]
        if field.startswith('"') and field.endswith('"'):
            assert example.text == field[1:-1]
        else:
            unquoted += 1
            assert example.text == field  # DeLFT would clip the first and last character here
    assert unquoted == 593


@pytest.mark.real_data
def test_licence_file_has_no_header() -> None:
    path = require_shared("classification/licenses/copyrights-licenses-data-validated.csv")
    corpus = read_cls(path, format="licenses")
    assert len(corpus) == 863  # DeLFT's pandas reading sees 862: it takes the first record for a header
    assert corpus.examples[0].line == 1 and corpus.examples[0].text.startswith("Content from this work")
    licences = Counter(e.labels[0] for e in corpus.examples)
    assert licences["undecided"] == 288 and licences["CC-BY"] == 246 and licences["other"] == 4 and len(licences) == 9
    owners = Counter(e.labels[0] for e in read_cls(path, format="licenses", label_columns=["copyright_owner"]).examples)
    assert owners == {"authors": 317, "publisher": 303, "undecided": 243}


def test_stratified_holdout_and_folds_keep_class_shares() -> None:
    examples = [ClsExample(f"t{i}", ("rare",) if i % 10 == 0 else ("common",), i + 1) for i in range(100)]
    corpus = ClsCorpus(examples)
    kept, held = stratified_holdout(corpus, 0.2, seed=7)
    assert len(held) == 20 and len(kept) == 80
    assert Counter(e.labels[0] for e in held.examples) == {"common": 18, "rare": 2}
    assert {e.text for e in kept.examples}.isdisjoint(e.text for e in held.examples)
    again, _ = stratified_holdout(corpus, 0.2, seed=7)
    assert [e.text for e in again.examples] == [e.text for e in kept.examples]
    folds = stratified_folds(examples, 5, seed=3)
    assert sorted(i for f in folds for i in f.tolist()) == list(range(100))
    assert [sum(1 for i in f if examples[i].labels == ("rare",)) for f in folds] == [2, 2, 2, 2, 2]
