"""``cls classify`` streams: the lazy reader gives the whole-file reader's texts in every input
format; chunks cut by tagging's rule (``--chunk-sequences``, ``--chunk-tokens``, or the
deprecated ``--chunk-size``) give the whole-file answer byte for byte (date and runtime aside);
a bad record far into the input leaves ``OUTPUT.partial``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_classification import tiny_examples, write_tiny_csv
from textorch.classification.classifier import TextClassifier
from textorch.classification.answer import classification_document
from textorch.classification.classify_files import ClassificationRun, read_for_classification
from textorch.classification.prediction import ClsPrediction
from textorch.cli.main import main
from textorch.data.cls_readers import ClsExample, read_cls
from textorch.data.cls_streams import stream_for_classification
from textorch.data.streams import ChunkSize
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


class _Echo:
    """A classifier that answers each text with its own words: what the run hands it, in order."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def predict(self, texts: list[str], batch_size: int, ctx: object) -> list[ClsPrediction]:
        self.calls.append(texts)
        return [ClsPrediction(text.split()) for text in texts]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 9])
def test_classification_chunks_are_the_tagging_rule_never_a_lone_text(n: int) -> None:
    examples = [ClsExample(str(i)) for i in range(n)]
    echo = _Echo()
    run = ClassificationRun(echo, iter(examples), chunk=ChunkSize(3, 10**6))  # type: ignore[arg-type]
    parts = [part for part, _ in run]
    assert [e for part in parts for e in part] == examples
    assert all(len(part) >= 2 for part in parts) or n == 1
    assert all(len(part) == 3 for part in parts[:-1])
    assert (run.n_sequences, run.n_tokens) == (n, n)


def test_classification_chunks_close_on_words_and_the_tally_counts_them() -> None:
    """Texts of 1, 6, 2, 2, 9 and 1 words with at most 5 words a chunk: a chunk closes once it
    holds 5 words and two texts; the lone last text joins the chunk before it."""
    examples = [ClsExample(" ".join(["w"] * k)) for k in (1, 6, 2, 2, 9, 1)]
    echo = _Echo()
    run = ClassificationRun(echo, examples, chunk=ChunkSize(100, 5))  # type: ignore[arg-type]
    answers = [(len(part), [p.labels for p in predictions]) for part, predictions in run]
    assert [n for n, _ in answers] == [2, 4]
    assert [labels for _, chunk in answers for labels in chunk] == [e.text.split() for e in examples]
    assert (run.n_sequences, run.n_tokens) == (6, 21)
    assert run.stats(0.0)["n_tokens"] == 21 and run.tag_s >= 0


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cls-streaming")
    assert main(["cls", "train", "--train", str(write_tiny_csv(root / "train.csv", 30)), "--output", str(root / "m"), *FAST]) == 0
    return root / "m"


def _without_volatile(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(('"date":', '"runtime":')))


def _whole_answer(model: Path, path: Path) -> str:
    classifier = TextClassifier.load(model, device="cpu")
    corpus = read_for_classification(str(path), None, classifier)
    document = classification_document(model.name, classifier, corpus, classifier.predict([e.text for e in corpus.examples]), 0.0)
    return _without_volatile(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


CHUNKINGS = {"texts": ["--chunk-sequences", "3"], "words": ["--chunk-sequences", "100", "--chunk-tokens", "5"]}


@pytest.mark.parametrize("n,chunking", [(1, "texts"), (3, "texts"), (4, "texts"), (8, "texts"), (8, "words")])
def test_streamed_classification_equals_the_whole_file_answer(model: Path, tmp_path: Path, n: int, chunking: str) -> None:
    path = _inputs(tmp_path, n)["jsonl"]
    out = tmp_path / "out" / "out.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(path), "--output", str(out), *CHUNKINGS[chunking],
                 "--device", "cpu"]) == 0
    assert _without_volatile(out.read_text(encoding="utf-8")) == _whole_answer(model, path)
    assert [p.name for p in out.parent.iterdir()] == ["out.json"]  # no temporary file left


@pytest.mark.parametrize("size", ["3", "1"])
def test_the_deprecated_chunk_size_still_works_and_says_so_once(model: Path, tmp_path: Path, size: str,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """Scripts written for ``--chunk-size N`` keep running: it is ``--chunk-sequences N`` (1,
    which the chunk rule never allows, read as 2) and the run warns once."""
    path = _inputs(tmp_path, 8)["jsonl"]
    out = tmp_path / "out.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(path), "--output", str(out), "--chunk-size", size,
                 "--device", "cpu", "--quiet"]) == 0
    assert _without_volatile(out.read_text(encoding="utf-8")) == _whole_answer(model, path)
    error = capsys.readouterr().err
    assert error.count("--chunk-size is deprecated") == 1, error
    assert f"use --chunk-sequences {max(int(size), 2)}" in error, error


def test_cls_help_shows_the_shared_options_not_the_alias(capsys: pytest.CaptureFixture) -> None:
    for command in ("classify", "eval"):
        with pytest.raises(SystemExit):
            main(["cls", command, "--help"])
        shown = capsys.readouterr().out
        assert "--chunk-sequences" in shown and "--chunk-tokens" in shown and "--chunk-size" not in shown


def test_a_bad_last_record_leaves_the_classified_ones_as_partial(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _inputs(tmp_path, 8)["jsonl"]
    path.write_text(path.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    out = tmp_path / "out" / "answer.json"
    assert main(["cls", "classify", "--model", str(model), "--input", str(path), "--output", str(out), "--chunk-sequences", "3",
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


@pytest.mark.parametrize("option", ["--chunk-sequences", "--chunk-size"])
def test_streamed_cls_eval_equals_the_whole_file_scores(model: Path, tmp_path: Path, option: str) -> None:
    from textorch.classification.classify_files import evaluate_classifier

    test = write_tiny_csv(tmp_path / "test.csv", 11, seed=4)
    metrics = tmp_path / "m.json"
    assert main(["cls", "eval", "--model", str(model), "--test", str(test), "--metrics-json", str(metrics), option, "3",
                 "--device", "cpu"]) == 0
    whole = evaluate_classifier(TextClassifier.load(model, device="cpu"), str(test))
    assert metrics.read_text(encoding="utf-8") == json.dumps(whole, indent=2, ensure_ascii=False) + "\n"
    assert sum(row["support"] for row in whole["per_class"].values()) == 11


def test_streamed_cls_eval_refuses_list_labels_for_a_single_label_model(model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    lists = _labelled_inputs(tmp_path)[1][0]
    assert main(["cls", "eval", "--model", str(model), "--test", str(lists), "--chunk-sequences", "3", "--device", "cpu"]) == 2
    assert "the model is single-label but the data is not" in capsys.readouterr().err
