"""``cls classify`` streams (issue 41): the lazy reader gives the whole-file reader's texts in
every input format, and small chunks give the whole-file answer byte for byte (date and
runtime aside); a bad record far into the input leaves ``OUTPUT.partial``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_classification import tiny_examples, write_tiny_csv
from textorch.classification.classifier import TextClassifier
from textorch.classification.answer import classification_document
from textorch.classification.classify_files import _chunks, read_for_classification
from textorch.cli.main import main
from textorch.data.cls_readers import ClsExample, read_cls
from textorch.data.cls_streams import stream_for_classification
from textorch.errors import DataError

FAST = ["--max-epoch", "2", "--batch-size", "8", "--seed", "3", "--hidden", "8", "--dense-size", "8", "--word-dim", "8",
        "--architecture", "gru_simple", "--device", "cpu"]


def _inputs(tmp_path: Path, n: int) -> dict[str, Path]:
    examples = tiny_examples(n)
    files = {
        "text": tmp_path / "in.txt", "jsonl": tmp_path / "in.jsonl", "tsv": tmp_path / "in.tsv",
        "csv": tmp_path / "in.csv", "citation-sentiment": tmp_path / "cit.txt",
    }
    files["text"].write_text("".join(e.text + "\n" for e in examples), encoding="utf-8")
    files["jsonl"].write_text("".join(json.dumps({"text": e.text, "label": "x"}) + "\n\n" for e in examples), encoding="utf-8")
    files["tsv"].write_text("label\ttext\n" + "".join(f"x\t{e.text}\n" for e in examples), encoding="utf-8")
    files["csv"].write_text("text,label\n" + "".join(f'"{e.text}\nsecond line, quoted",x\n' for e in examples), encoding="utf-8")
    files["citation-sentiment"].write_text("# comment\n" + "".join(f'a\tb\tp\t"{e.text}"\n' for e in examples), encoding="utf-8")
    return files


@pytest.mark.parametrize("fmt", ["text", "jsonl", "tsv", "csv", "citation-sentiment"])
def test_streamed_examples_are_the_whole_file_readers(tmp_path: Path, fmt: str) -> None:
    path = _inputs(tmp_path, 7)[fmt]
    assert list(stream_for_classification(path, fmt)) == read_cls(path, fmt, labelled=False).examples


def test_an_empty_input_has_no_records_either_way(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="no records found"):
        list(stream_for_classification(path, "text"))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 9])
def test_chunks_never_leave_a_lone_text(n: int) -> None:
    examples = [ClsExample(str(i)) for i in range(n)]
    parts = list(_chunks(iter(examples), 3))
    assert [e for part in parts for e in part] == examples
    assert all(len(part) >= 2 for part in parts) or n == 1
    assert all(len(part) == 3 for part in parts[:-1])


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cls-streaming")
    assert main(["cls", "train", "--train", str(write_tiny_csv(root / "train.csv", 30)), "--output", str(root / "m"), *FAST]) == 0
    return root / "m"


def _without_volatile(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(('"date":', '"runtime":')))


@pytest.mark.parametrize("n", [1, 3, 4, 8])
def test_streamed_classification_equals_the_whole_file_answer(model: Path, tmp_path: Path, n: int) -> None:
    path = _inputs(tmp_path, n)["jsonl"]
    out = tmp_path / "out" / "out.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(path), "--output", str(out), "--chunk-size", "3",
                 "--device", "cpu"]) == 0
    classifier = TextClassifier.load(model, device="cpu")
    corpus = read_for_classification(str(path), None, classifier)
    document = classification_document(model.name, classifier, corpus, classifier.predict([e.text for e in corpus.examples]), 0.0)
    whole = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    assert _without_volatile(out.read_text(encoding="utf-8")) == _without_volatile(whole)
    assert [p.name for p in out.parent.iterdir()] == ["out.json"]  # no temporary file left


def test_a_bad_last_record_leaves_the_classified_ones_as_partial(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _inputs(tmp_path, 8)["jsonl"]
    path.write_text(path.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    out = tmp_path / "out" / "answer.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(path), "--output", str(out), "--chunk-size", "3",
                 "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert f"{path}:17: invalid JSON" in error and "the 8 texts" in error and "answer.json.partial" in error, error
    assert sorted(p.name for p in out.parent.iterdir()) == ["answer.json.partial"]
    assert len(json.loads(out.with_name("answer.json.partial").read_text())["classifications"]) == 8


# ---------------------------------------------------------------------------- evaluation
def _labelled_inputs(tmp_path: Path) -> list[tuple[Path, str, tuple[str, ...]]]:
    examples = tiny_examples(7)
    single = tmp_path / "single.jsonl"
    single.write_text("".join(json.dumps({"text": e.text, "label": e.labels[0]}) + "\n" for e in examples), encoding="utf-8")
    lists = tmp_path / "lists.jsonl"
    lists.write_text("".join(json.dumps({"text": e.text, "label": [e.labels[0], "x"] if i == 5 else e.labels[0]}) + "\n"
                             for i, e in enumerate(examples)), encoding="utf-8")
    indicators = tmp_path / "ind.csv"
    indicators.write_text("text,a,b\n" + "".join(f"{e.text},{i % 2},{1 - i % 2}\n" for i, e in enumerate(examples)), encoding="utf-8")
    bare = tmp_path / "bare.tsv"
    bare.write_text("".join(f"{e.text}\t{e.labels[0]}\n" for e in examples), encoding="utf-8")
    citations = _inputs(tmp_path, 7)["citation-sentiment"]
    licences = tmp_path / "lic.csv"
    licences.write_text("".join(f'"{e.text}",someone,{e.labels[0]}\n' for e in examples), encoding="utf-8")
    return [(single, "jsonl", ()), (lists, "jsonl", ()), (indicators, "csv", ("a", "b")), (bare, "tsv", ()),
            (citations, "citation-sentiment", ()), (licences, "licenses", ())]


def test_labelled_streams_read_what_the_whole_file_reader_reads(tmp_path: Path) -> None:
    from textorch.data.cls_streams import ClsStream

    for path, fmt, columns in _labelled_inputs(tmp_path):
        header = path.suffix != ".tsv"
        corpus = read_cls(path, fmt, label_columns=columns, header=header)
        stream = ClsStream(path, fmt, label_columns=columns, header=header, labelled=True)
        assert list(stream) == corpus.examples, path
        assert (stream.multi_label, stream.classes, stream.label_columns) == (corpus.multi_label, corpus.classes, corpus.label_columns), path


def test_streamed_cls_eval_equals_the_whole_file_scores(model: Path, tmp_path: Path) -> None:
    from textorch.classification.classify_files import evaluate_classifier

    test = write_tiny_csv(tmp_path / "test.csv", 11, seed=4)
    metrics = tmp_path / "m.json"
    assert main(["cls", "eval", "--model", str(model), "--test", str(test), "--metrics-json", str(metrics), "--chunk-size", "3",
                 "--device", "cpu"]) == 0
    whole = evaluate_classifier(TextClassifier.load(model, device="cpu"), str(test))
    assert metrics.read_text(encoding="utf-8") == json.dumps(whole, indent=2, ensure_ascii=False) + "\n"
    assert sum(row["support"] for row in whole["per_class"].values()) == 11


def test_streamed_cls_eval_refuses_list_labels_for_a_single_label_model(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    lists = _labelled_inputs(tmp_path)[1][0]
    assert main(["cls", "eval", "--model", str(model), "--test", str(lists), "--chunk-size", "3", "--device", "cpu"]) == 2
    assert "the model is single-label but the data is not" in capsys.readouterr().err
