"""Streamed tagging and evaluation (issue 41): the lazy readers give the whole-file readers'
sequences and errors, chunks cover the input in order, and ``seq tag`` / ``grobid MODEL tag`` /
``seq eval`` with small chunks give byte for byte what the whole-file route gives; a failure far
into a file leaves ``OUTPUT.partial`` with what was tagged and no ``OUTPUT``."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, write_tiny_conll, write_tiny_grobid
from textorch.cli.main import main
from textorch.data.corpus import TokenSequence
from textorch.data.readers import read_conll, read_file_text, read_grobid, read_labelled, read_text
from textorch.data.streams import chunks, numbered_lines, stream_conll, stream_grobid, stream_labelled, stream_text
from textorch.data.writers import write_conll, write_grobid
from textorch.errors import DataError
from textorch.runtime.progress import TaggingProgress
from textorch.tagging.answer import tagging_document
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.tag_files import read_for_tagging

SMALL = ["--chunk-sequences", "3", "--chunk-tokens", "1000000"]


# ------------------------------------------------------------------------------- reading
@pytest.mark.parametrize("content", [
    b"", b"\n", b"a b\n", b"a b", b"\xef\xbb\xbfJune \xc3\xa9t\xc3\xa9\r\nx\r\n\r\n\n  \nlast",
    ("caf\u00e9 " * 9 + "\n").encode() * 7 + b"\n\n",
])
def test_numbered_lines_are_the_whole_file_split(tmp_path: Path, content: bytes) -> None:
    """Blocks of 5 bytes cut inside characters, BOM, CRLF and lines: the same lines as decoding
    the file whole and splitting it."""
    path = tmp_path / "f.txt"
    path.write_bytes(content)
    assert list(numbered_lines(path, block_bytes=5)) == list(enumerate(read_file_text(path).split("\n"), 1))


def test_bad_utf8_far_into_a_file_is_placed_as_the_whole_file_reader_places_it(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"ok line\n" * 50 + b"ab\xff cd\n" + b"more\n")
    with pytest.raises(DataError) as whole:
        read_file_text(path)
    lines = numbered_lines(path, block_bytes=16)
    assert [next(lines) for _ in range(50)][-1] == (50, "ok line")  # read before the bad byte is met
    with pytest.raises(DataError) as streamed:
        list(lines)
    assert str(streamed.value) == str(whole.value) == f"{path}:51: invalid UTF-8 (byte 0xff at column 3)"


def _grobid_input(path: Path, n: int, huge: int = 0, bad_last: bool = False) -> Path:
    """``n`` unlabelled date sequences of the tiny corpus (token + 4 features), optionally one of
    ``huge`` tokens in the middle, and optionally a malformed last sequence."""
    source = write_tiny_grobid(path.with_suffix(".src"), n=max(n, 1))
    blocks = [block for block in source.read_text().split("\n\n \n") if block.strip()][:n]
    blocks = ["\n".join(" ".join(line.split()[:-1]) for line in block.strip().splitlines()) for block in blocks]
    if huge:
        row = "June june LINEIN INITCAP NOPUNCT\n12 12 LINEIN NOCAPS NOPUNCT\n"
        blocks.insert(len(blocks) // 2, (row * (huge // 2)).strip())
    if bad_last:
        blocks.append("June june LINESTART INITCAP NOPUNCT\n12 12\n2005 2005 LINEEND NOCAPS NOPUNCT")
    path.write_text("".join(block + "\n\n" for block in blocks), encoding="utf-8")
    return path


def test_streamed_readers_give_the_whole_file_readers_sequences(tmp_path: Path) -> None:
    grobid = _grobid_input(tmp_path / "in.grobid", 9, huge=40)
    conll = write_tiny_conll(tmp_path / "in.conll", 7)
    text = tmp_path / "in.txt"
    text.write_text("Mary lives in Rome.\n\n  \nPeter", encoding="utf-8")
    labelled = write_tiny_grobid(tmp_path / "train.grobid", 9)
    assert list(stream_grobid(grobid, labelled=False, n_features=4)) == read_grobid(grobid, False, 4).sequences
    assert list(stream_conll(conll, labelled=False)) == read_conll(conll, labelled=False).sequences
    assert list(stream_conll(conll)) == read_conll(conll).sequences
    assert list(stream_text(text)) == read_text(text).sequences
    for path in (labelled, conll):
        found, sequences = stream_labelled(path)
        whole = read_labelled(path)
        assert found == whole.format and list(sequences) == whole.sequences


def test_a_malformed_last_sequence_is_met_after_the_others_are_read(tmp_path: Path) -> None:
    path = _grobid_input(tmp_path / "in.grobid", 30, bad_last=True)
    stream = stream_grobid(path, labelled=False, n_features=4)
    first = [next(stream) for _ in range(30)]
    assert [s.line for s in first] == [s.line for s in read_grobid(_grobid_input(tmp_path / "ok.grobid", 30), False, 4).sequences]
    with pytest.raises(DataError, match=r"in\.grobid:\d+: expected 5 fields \(as on line 1\), found 2"):
        next(stream)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 13])
def test_chunks_cover_the_input_in_order_and_never_leave_a_lone_sequence(n: int) -> None:
    sequences = [TokenSequence(["t"] * (1 + i % 5), line=i) for i in range(n)]
    parts = list(chunks(iter(sequences), max_sequences=4, max_tokens=10**6))
    assert [s for part in parts for s in part] == sequences
    assert all(2 <= len(part) <= 5 for part in parts) or n == 1
    assert sum(len(part) for part in parts[:-1]) == 4 * max(len(parts) - 1, 0)  # all full but the last


def test_chunks_close_on_tokens_and_keep_a_huge_sequence_with_a_neighbour() -> None:
    sequences = [TokenSequence(["t"] * 3) for _ in range(6)]
    sequences.insert(2, TokenSequence(["t"] * 100))
    parts = list(chunks(sequences, max_sequences=100, max_tokens=7))
    assert [len(part) for part in parts] == [3, 4]  # 6 then 106 tokens; 9 tokens, then the lone last one joins
    assert [s for part in parts for s in part] == sequences


# ------------------------------------------------------------------------- tagging commands
@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CoNLL tagger and a GROBID one, one epoch each (good enough to tag, labels vary)."""
    root = tmp_path_factory.mktemp("streaming")
    trained = {}
    for kind, data in (("conll", write_tiny_conll(root / "train.conll", 24)), ("grobid", write_tiny_grobid(root / "train.grobid", 24))):
        trained[kind] = root / kind
        assert main(["seq", "train", "--train", str(data), "--output", str(trained[kind]), "--max-epoch", "1",
                     "--batch-size", "8", "--early-stop", "false", "--seed", "2", "--device", "cpu"]) == 0
    return trained


def _text_input(path: Path, n: int, huge: int = 0) -> Path:
    words = ["Mary", "lives", "in", "Rome", ".", "Peter", "Berlin", "and", "John", ","]
    lines = [" ".join(words[(i + j) % len(words)] for j in range(i % 7)) for i in range(n)]
    if huge:
        lines.insert(n // 2, " ".join(words[j % len(words)] for j in range(huge)))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _whole_file(model: Path, path: Path, input_format: str, engine: str = "torch") -> str:
    """What ``seq tag`` wrote before streaming: the whole file read, tagged in one call, written."""
    labeler = SequenceLabeler.load(model, device="cpu", engine=engine)
    corpus = read_for_tagging(str(path), input_format, labeler)
    predictions = labeler.predict(corpus.sequences, batch_size=32, with_scores=input_format == "text")
    out = io.StringIO()
    if input_format == "text":
        out.write(json.dumps(tagging_document(model.name, corpus.sequences, predictions, 0.0), ensure_ascii=False, indent=2) + "\n")
    else:
        (write_grobid if input_format == "grobid" else write_conll)(corpus, [p.labels for p in predictions], out)
    return out.getvalue()


def _without_volatile(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(('"date":', '"runtime":')))


@pytest.mark.parametrize("n", [0, 1, 3, 4, 7, 8])
@pytest.mark.parametrize("input_format", ["text", "conll", "grobid"])
def test_streamed_tagging_equals_the_whole_file_route(models: dict[str, Path], tmp_path: Path, input_format: str, n: int) -> None:
    """Chunks of 3: empty input, one sequence, one full chunk, a chunk and a lone last sequence,
    several chunks and a partial last one; byte for byte (date and runtime aside)."""
    huge = 300 if n == 7 else 0
    if input_format == "text":
        path, model = _text_input(tmp_path / "in.txt", n, huge), models["conll"]
    elif input_format == "conll":
        path, model = tmp_path / "in.conll", models["conll"]
        path.write_text("".join(f"{t}\n" for line in _text_input(tmp_path / "t.txt", n, huge).read_text().splitlines()
                                for t in line.split() + [""] if line.strip()), encoding="utf-8")
    else:
        path, model = _grobid_input(tmp_path / "in.grobid", n, huge), models["grobid"]
    out = tmp_path / "out" / "tagged"
    assert main(["seq", "tag", "--model", str(model), "--input", str(path), "--input-format", input_format,
                 "--output", str(out), "--device", "cpu", *SMALL]) == 0
    assert _without_volatile(out.read_text(encoding="utf-8")) == _without_volatile(_whole_file(model, path, input_format))
    assert sorted(p.name for p in out.parent.iterdir()) == ["tagged"]  # no temporary file left


@pytest.mark.parametrize("input_format", ["text", "grobid"])
def test_chunks_closed_by_tokens_give_the_whole_file_answer(models: dict[str, Path], tmp_path: Path, input_format: str) -> None:
    """``--chunk-tokens`` small enough that chunks close on tokens, not on sequences."""
    if input_format == "text":
        path, model = _text_input(tmp_path / "in.txt", 9, huge=40), models["conll"]
    else:
        path, model = _grobid_input(tmp_path / "in.grobid", 9, huge=40), models["grobid"]
    out = tmp_path / "tagged"
    assert main(["seq", "tag", "--model", str(model), "--input", str(path), "--input-format", input_format,
                 "--output", str(out), "--device", "cpu", "--chunk-sequences", "100", "--chunk-tokens", "12"]) == 0
    assert _without_volatile(out.read_text(encoding="utf-8")) == _without_volatile(_whole_file(model, path, input_format))


def test_streamed_tagging_with_onnx_runtime_equals_its_whole_file_route(models: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the ONNX engine needs onnxruntime (pip install 'textorch[onnx]')")
    path = _text_input(tmp_path / "in.txt", 8, huge=200)
    out = tmp_path / "out.json"
    assert main(["seq", "tag", "--model", str(models["conll"]), "--input", str(path), "--output", str(out), "--device", "cpu",
                 "--engine", "onnx", *SMALL]) == 0
    whole = _whole_file(models["conll"], path, "text", engine="onnx")
    assert _without_volatile(out.read_text(encoding="utf-8")) == _without_volatile(whole)


def test_json_on_stdout_streams_with_runtime_last(models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _text_input(tmp_path / "in.txt", 8)
    assert main(["seq", "tag", "--model", str(models["conll"]), "--input", str(path), "--device", "cpu", *SMALL]) == 0
    printed = capsys.readouterr().out
    document, whole = json.loads(printed), json.loads(_whole_file(models["conll"], path, "text"))
    assert list(document)[-1] == "runtime" and document["runtime"] >= 0
    for key in ("date", "runtime"):
        document.pop(key), whole.pop(key)
    assert document == whole


def test_grobid_tag_streams_the_answer_of_the_whole_file(models: dict[str, Path], tmp_path: Path) -> None:
    path = _grobid_input(tmp_path / "in.grobid", 8, huge=50)
    out = tmp_path / "answer.json"
    assert main(["grobid", "date", "tag", "--output", str(models["grobid"]), "--input", str(path), "--tag-output", str(out),
                 "--device", "cpu", *SMALL]) == 0
    labeler = SequenceLabeler.load(models["grobid"], device="cpu")
    sequences = read_for_tagging(str(path), "grobid", labeler).sequences
    document = tagging_document(models["grobid"].name, sequences, labeler.predict(sequences), 0.0, labels_as="grobid")
    whole = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    assert _without_volatile(out.read_text(encoding="utf-8")) == _without_volatile(whole)


@pytest.mark.parametrize("input_format", ["grobid", "text"])
def test_an_error_on_the_last_sequence_leaves_the_tagged_ones_as_partial(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture, input_format: str,
) -> None:
    if input_format == "grobid":
        good, model = _grobid_input(tmp_path / "good.grobid", 40), models["grobid"]
        bad = _grobid_input(tmp_path / "bad.grobid", 40, bad_last=True)
        bad_line = bad.read_text().splitlines().index("12 12") + 1
    else:
        good, model = _text_input(tmp_path / "good.txt", 40), models["conll"]
        bad = tmp_path / "bad.txt"
        bad.write_bytes(good.read_bytes() + b"Mary \xff\n")
        bad_line = 41
    out = tmp_path / "out" / "tagged"
    out.parent.mkdir()
    out.write_text("an earlier run's output\n")
    assert main(["seq", "tag", "--model", str(model), "--input", str(bad), "--input-format", input_format,
                 "--output", str(out), "--device", "cpu", *SMALL]) == 2
    error = capsys.readouterr().err
    partial = out.with_name("tagged.partial")
    assert f"{bad}:{bad_line}: " in error and "the 40 " in error and str(partial) in error, error
    assert out.read_text() == "an earlier run's output\n"  # not replaced by a broken file
    assert sorted(p.name for p in out.parent.iterdir()) == ["tagged", "tagged.partial"]
    written = partial.read_text(encoding="utf-8")
    if input_format == "text":
        json.loads(written)  # a complete document of the texts before the bad line
    assert _without_volatile(written) == _without_volatile(_whole_file(model, good, input_format))
    # a later run that succeeds replaces the output and removes the out-of-date part
    assert main(["seq", "tag", "--model", str(model), "--input", str(good), "--input-format", input_format,
                 "--output", str(out), "--device", "cpu", *SMALL]) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["tagged"]


def test_a_failure_before_anything_is_tagged_leaves_no_file(models: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.grobid"
    bad.write_text("June june\n", encoding="utf-8")
    out = tmp_path / "out.grobid"
    assert main(["seq", "tag", "--model", str(models["grobid"]), "--input", str(bad), "--input-format", "grobid",
                 "--output", str(out), "--device", "cpu"]) == 2
    assert list(tmp_path.iterdir()) == [bad]


def test_streamed_evaluation_equals_the_whole_file_evaluation(models: dict[str, Path], tmp_path: Path) -> None:
    gold = write_tiny_conll(tmp_path / "gold.conll", 11)
    metrics = tmp_path / "m.json"
    assert main(["seq", "eval", "--model", str(models["conll"]), "--test", str(gold), "--metrics-json", str(metrics),
                 "--device", "cpu", *SMALL]) == 0
    streamed = json.loads(metrics.read_text())
    whole = SequenceLabeler.load(models["conll"], device="cpu").evaluate(gold)
    assert streamed["n_sequences"] == 11 and streamed == json.loads(json.dumps(whole))


# ------------------------------------------------------------------------------ progress
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_not_when_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    for stream, enabled, drawn in ((_Terminal(), True, True), (_Terminal(), False, False), (io.StringIO(), True, False)):
        monkeypatch.setattr(sys, "stderr", stream)
        with TaggingProgress("tagging", enabled) as progress:
            progress.update(5, 120)
            if progress.bar is not None:
                progress.bar.refresh()
        assert ("120 tok" in stream.getvalue() and "5 seq" in stream.getvalue()) == drawn, stream.getvalue()
        assert (progress.bar is not None) == drawn


# ---------------------------------------------------------------------------- two processes
@pytest.mark.processes
def test_streamed_tagging_with_2_devices_equals_1_device(models: dict[str, Path], tmp_path: Path) -> None:
    """Each process tags its share of each chunk; the output is in input order, the same bytes.
    The one-process run goes through ``main`` here, the two-process one starts the real command."""
    path = _text_input(tmp_path / "in.txt", 23, huge=120)
    outputs = {devices: tmp_path / f"out{devices}.json" for devices in ("1", "2")}
    common = ["seq", "tag", "--model", str(models["conll"]), "--input", str(path), "--device", "cpu", "--threads", "1", *SMALL]
    assert main([*common, "--output", str(outputs["1"]), "--devices", "1"]) == 0
    result = subprocess.run([sys.executable, "-m", "textorch.cli.main", *common, "--output", str(outputs["2"]), "--devices", "2"],
                            capture_output=True, text=True, timeout=240, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    assert _without_volatile(outputs["2"].read_text()) == _without_volatile(outputs["1"].read_text())
    assert len(json.loads(outputs["2"].read_text())["texts"]) == 24


def test_an_unwritable_output_fails_before_tagging(models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _text_input(tmp_path / "in.txt", 5)
    blocker = tmp_path / "file"
    blocker.write_text("")
    for output, reason in ((tmp_path, "is a folder"), (blocker / "out.json", "cannot write the output")):
        assert main(["seq", "tag", "--model", str(models["conll"]), "--input", str(path), "--output", str(output),
                     "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert f"{output}: {reason}" in err and "Traceback" not in err, err


@pytest.mark.processes
def test_a_bad_last_sequence_with_2_devices_is_reported_once_with_the_partial(models: dict[str, Path], tmp_path: Path) -> None:
    bad = _grobid_input(tmp_path / "bad.grobid", 20, bad_last=True)
    out = tmp_path / "out" / "tagged"
    result = subprocess.run(
        [sys.executable, "-m", "textorch.cli.main", "seq", "tag", "--model", str(models["grobid"]), "--input", str(bad),
         "--input-format", "grobid", "--output", str(out), "--device", "cpu", "--threads", "1", "--devices", "2", *SMALL],
        capture_output=True, text=True, timeout=240, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("textorch: error:")]
    assert len(errors) == 1 and f"{bad}:" in errors[0] and "the 20 sequences" in errors[0] and "tagged.partial" in errors[0], result.stderr
    good = _grobid_input(tmp_path / "good.grobid", 20)
    assert out.with_name("tagged.partial").read_text(encoding="utf-8") == _whole_file(models["grobid"], good, "grobid")


def test_a_streamed_run_leaves_no_garbage_that_grows_with_the_input(models: dict[str, Path], tmp_path: Path) -> None:
    """With the cyclic collector paused around a run (as a program may do), whatever a chunk
    left in reference cycles would stay until the end: nothing may depend on the input's size."""
    import gc

    from textorch.data.staged_output import StagedOutput
    from textorch.data.streams import ChunkSize
    from textorch.tagging.tag_files import TaggedWriter, TaggingRun, stream_for_tagging

    labeler = SequenceLabeler.load(models["conll"], device="cpu")

    def cycles_left(n: int) -> int:
        path = _text_input(tmp_path / f"in{n}.txt", n)
        gc.collect()
        gc.disable()
        try:
            staged = StagedOutput(tmp_path / f"out{n}.json")
            writer = TaggedWriter(staged, "json", "m")
            for chunk, predictions in TaggingRun(labeler, stream_for_tagging(str(path), "text", labeler), 8, chunk=ChunkSize(4, 10**6)):
                writer.add(chunk, predictions)
            staged.finish(failed=False)
            return gc.collect()
        finally:
            gc.enable()

    cycles_left(6)  # first calls build what stays (compiled kernels, caches)
    assert cycles_left(80) == cycles_left(10)


def test_gzipped_input_streams_as_the_whole_file_reader_reads_it(tmp_path: Path) -> None:
    import gzip

    plain = _grobid_input(tmp_path / "in.grobid", 9)
    packed = tmp_path / "in.grobid.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(numbered_lines(packed, block_bytes=7)) == list(enumerate(read_file_text(plain).split("\n"), 1))
    assert list(stream_grobid(packed, labelled=False, n_features=4)) == read_grobid(plain, False, 4).sequences
    broken = tmp_path / "broken.grobid.gz"
    broken.write_bytes(gzip.compress(plain.read_bytes())[:-12])
    with pytest.raises(DataError, match="cannot read file"):
        list(numbered_lines(broken))


def test_grobid_rows_given_as_text_are_warned_about_and_real_text_is_not(
        models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A features model's training layout passed with the default ``--input-format text`` is
    tagged line by line as texts; the command says so on stderr, naming the file, and only then."""
    rows, text = _grobid_input(tmp_path / "in.grobid", 4), _text_input(tmp_path / "in.txt", 6)
    for path, warned in ((rows, True), (text, False)):
        capsys.readouterr()
        assert main(["seq", "tag", "--model", str(models["grobid"]), "--input", str(path),
                     "--output", str(tmp_path / "out.json"), "--device", "cpu", *SMALL]) == 0
        expected = (f"WARNING {path}: its first lines look like GROBID feature rows (a token and 4 feature columns, "
                    "as this model's training data), but --input-format is text: each line is tagged as a text. "
                    "Pass --input-format grobid to tag them as tokens.")
        assert (expected in capsys.readouterr().err) is warned


def test_the_whole_file_reader_warns_about_grobid_rows_given_as_text_too(
        models: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``read_for_tagging`` (the API's whole-file route) gives the same warning as the command,
    and still reads each line as a text."""
    rows = _grobid_input(tmp_path / "in.grobid", 4)
    labeler = SequenceLabeler.load(models["grobid"], device="cpu")
    with caplog.at_level(logging.WARNING, logger="textorch.tagging.tag_files"):
        corpus = read_for_tagging(str(rows), "text", labeler)
    assert [r.getMessage().split(":")[0] for r in caplog.records if "GROBID feature rows" in r.getMessage()] == [str(rows)]
    assert len(corpus.sequences) == len(rows.read_text().splitlines())


def test_an_interrupt_between_a_write_and_its_count_keeps_count_and_partial_agreeing(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A Ctrl-C or SIGTERM can land after a chunk is written and before it is counted: the
    ``.partial`` is cut back to what was counted, so the message and the file agree."""
    from textorch.data.staged_output import staged_output

    target = tmp_path / "tagged.txt"
    with pytest.raises(KeyboardInterrupt):
        with staged_output(target) as staged:
            staged.out.write("a x\n\n")
            staged.wrote(1)
            staged.out.write("b y\n\nc z\n\n")  # written whole, the signal arrives before staged.wrote(2)
            raise KeyboardInterrupt
    partial = tmp_path / "tagged.txt.partial"
    assert partial.read_text(encoding="utf-8") == "a x\n\n"
    assert f"the 1 sequences written before it are in {partial}" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tagged.txt.partial"]
