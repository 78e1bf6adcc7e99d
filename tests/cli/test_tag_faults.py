"""Faults an operator meets with ``textorch seq tag`` (issue #52): each one line on stderr, no
traceback, exit status 2, and nothing read or written that should not be.

The runs that could hang or grow without bound if the fault came back (``/dev/zero``, a FIFO)
go in a child process with a time limit and a cap on its memory, so that a regression fails
the test instead of stalling the suite or the machine.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, cli_trained_tagger, file_size_limit, write_tiny_grobid
from textorch.cli.main import main

MEMORY_CAP = 3 << 30
"""Address space of a child ``textorch`` process: room for torch, not for reading /dev/zero whole."""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GROBID tagger with feature columns: the kind whose text input is looked at first."""
    root = tmp_path_factory.mktemp("faults")
    return cli_trained_tagger(root / "model", write_tiny_grobid(root / "train.grobid", 24))


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _signals_as_a_terminal_gives_them() -> None:
    """The memory cap, and SIGINT at its default: a test run started in the background (``make
    test &``, ``nohup``) inherits SIGINT ignored, and Python then installs no Ctrl-C handler in
    the child, which would tag on through the signal the test sends."""
    _cap_memory()
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _textorch(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``textorch ARGV`` in a child process, its memory capped, killed after ``timeout`` seconds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "textorch.cli.main", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, preexec_fn=_cap_memory)


def _one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("textorch: error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    return errors[0].removeprefix("textorch: error: ")


# ------------------------------------------------------- a model whose files do not agree
@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The format-1 fixture tagger (4 labels, GROBID features) with its export, int8 included, made
    while its files agreed: the ONNX routes then run it without loading the network."""
    from model_fixture import v1_model_dir

    model = v1_model_dir(tmp_path_factory.mktemp("agree") / "model")
    assert main(["export", "onnx", "--model", str(model), "--quantize"]) == 0
    return model


def _labels_removed(model: Path, target: Path, n: int) -> Path:
    import shutil

    shutil.copytree(model, target)
    vocab = json.loads((target / "vocab.json").read_text())
    vocab["labels"]["items"] = vocab["labels"]["items"][:-n]
    (target / "vocab.json").write_text(json.dumps(vocab))
    return target


@pytest.mark.parametrize("removed", [1, 2])
@pytest.mark.parametrize("route", [["--engine", "torch"], ["--engine", "onnx"], ["--engine", "auto"],
                                   ["--engine", "onnx", "--quantized"]])
@pytest.mark.parametrize("input_format", ["grobid", "text"])
def test_a_vocabulary_with_labels_removed_is_refused_by_every_engine(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, removed: int, route: list[str], input_format: str,
) -> None:
    """Before: the ONNX routes wrote shifted labels (one removed) or died in an IndexError (two),
    PyTorch said six lines of ``size mismatch``."""
    model = _labels_removed(exported, tmp_path / "model", removed)
    data = write_tiny_grobid(tmp_path / "in.grobid", 4)
    out = tmp_path / "out"
    assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", input_format,
                 "--output", str(out), "--device", "cpu", *route]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == (f"{model / 'vocab.json'}: {4 - removed} labels, but model.safetensors was trained for 4 "
                    "(head.crf.end_transitions); the vocabulary and the weights are not of one model"), line
    assert not out.exists()


@pytest.mark.parametrize("engine", ["torch", "onnx", "auto"])
def test_an_unknown_architecture_names_the_config_file(exported: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture, engine: str) -> None:
    """Before: ``unknown architecture 'NoSuchArch'; choose one of: ...``, which named no file."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(exported, model)
    config = json.loads((model / "config.json").read_text())
    config["model"]["architecture"] = "NoSuchArch"
    (model / "config.json").write_text(json.dumps(config))
    data = write_tiny_grobid(tmp_path / "in.grobid", 2)
    assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", "grobid",
                 "--output", str(tmp_path / "out"), "--device", "cpu", "--engine", engine]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"{model / 'config.json'}: unknown architecture 'NoSuchArch'; "), line


@pytest.mark.parametrize("input_format,engine", [("grobid", "torch"), ("text", "torch"), ("grobid", "onnx")])
def test_a_gz_input_cut_short_keeps_what_was_tagged_as_partial(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, input_format: str, engine: str,
) -> None:
    """A ``.gz`` cut short (a copy interrupted): the whole lines it holds are tagged and kept in
    ``OUTPUT.partial``, the error names the file and the first line not read whole. Before, the
    last block read (here the whole file, under 1 MiB unpacked) was lost with no ``.partial``."""
    import gzip
    import zlib

    plain = write_tiny_grobid(tmp_path / "in.grobid", 1500)
    packed = gzip.compress(plain.read_bytes())
    cut = tmp_path / "cut.grobid.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    readable = zlib.decompressobj(wbits=31).decompress(cut.read_bytes())
    whole_lines = readable[: readable.rfind(b"\n") + 1].count(b"\n")
    out, full = tmp_path / "out", tmp_path / "full"
    common = ["--input-format", input_format, "--device", "cpu", "--engine", engine]
    assert main(["seq", "tag", "--model", str(exported), "--input", str(plain), "--output", str(full), *common]) == 0
    capsys.readouterr()
    assert main(["seq", "tag", "--model", str(exported), "--input", str(cut), "--output", str(out), *common]) == 2
    line = _one_error_line(capsys.readouterr().err)
    partial = out.with_name("out.partial")
    unit = "texts" if input_format == "text" else "sequences"
    prefix = f"{cut}:{whole_lines + 1}: cannot read file: Compressed file ended before the end-of-stream marker was reached (the "
    assert line.startswith(prefix) and line.endswith(f" {unit} written before it are in {partial})"), line
    kept = int(line.removeprefix(prefix).split()[0])
    assert kept > 1000 if input_format == "text" else kept > 200
    assert not out.exists()
    if input_format == "text":  # a JSON answer, closed: its texts are the first of the whole file's
        texts = json.loads(partial.read_text())["texts"]
        assert len(texts) == kept and texts == json.loads(full.read_text())["texts"][:kept]
    else:
        assert partial.read_text().count("\n\n") == kept and full.read_text().startswith(partial.read_text())


def test_a_graph_of_another_label_count_is_refused_naming_it(exported: Path) -> None:
    import onnxruntime

    from textorch.errors import ModelFormatError
    from textorch.onnx.layout import check_graph_labels

    graph = exported / "onnx" / "model.onnx"
    session = onnxruntime.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    check_graph_labels(session, graph, 4, exported)
    with pytest.raises(ModelFormatError) as error:
        check_graph_labels(session, graph, 3, exported)
    assert str(error.value) == (f"{graph}: the graph gives 4 labels, but {exported / 'vocab.json'} has 3; "
                                "the export is not of this model")


# --------------------------------------------------------------- input that is not a regular file
@pytest.mark.parametrize("input_format", ["text", "grobid", "conll"])
def test_tagging_dev_zero_is_refused_before_anything_is_read(model: Path, tmp_path: Path, input_format: str) -> None:
    out = tmp_path / "out"
    done = _textorch("seq", "tag", "--model", str(model), "--input", "/dev/zero", "--input-format", input_format,
                     "--output", str(out), "--device", "cpu")
    assert done.returncode == 2, done.stderr
    assert _one_error_line(done.stderr) == "/dev/zero: not a regular file"
    assert list(tmp_path.iterdir()) == []  # no output, no temporary file


def test_tagging_a_fifo_is_refused_without_opening_it(model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)  # no writer: opening it to read would wait forever
    out = tmp_path / "out.json"
    done = _textorch("seq", "tag", "--model", str(model), "--input", str(fifo), "--output", str(out), "--device", "cpu")
    assert done.returncode == 2, done.stderr
    assert _one_error_line(done.stderr) == f"{fifo}: not a regular file"
    assert list(tmp_path.iterdir()) == [fifo]


def test_the_look_at_the_first_lines_reads_a_bounded_part(model: Path, tmp_path: Path) -> None:
    """A regular file without a line end (a binary file given by mistake) is not read whole by
    the look at its first lines: only :data:`SNIFF_CHARS` of it."""
    from textorch.tagging import tag_files

    big = tmp_path / "one-line"
    with open(big, "w", encoding="utf-8") as handle:
        for _ in range(4):
            handle.write("x" * tag_files.SNIFF_CHARS)
    assert tag_files._leading_fields(str(big), 3) == []
    short = tmp_path / "short"
    short.write_text("a b\n\nc d e\n")
    assert tag_files._leading_fields(str(short), 3) == [["a", "b"], ["c", "d", "e"]]


# ------------------------------------------------------------------------------- bad options
@pytest.mark.parametrize("engine", ["torch", "onnx", "auto"])
@pytest.mark.parametrize("batch_size", ["0", "-3"])
def test_a_batch_size_below_one_is_a_config_error_for_every_engine(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, engine: str, batch_size: str,
) -> None:
    text = tmp_path / "in.txt"
    text.write_text("".join(f"June {day} , 2005\n" for day in range(1, 40)))
    out = tmp_path / "out.json"
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(out), "--device", "cpu",
                 "--engine", engine, "--batch-size", batch_size]) == 2
    assert _one_error_line(capsys.readouterr().err) == f"--batch-size must be >= 1, got {batch_size}"
    assert sorted(tmp_path.iterdir()) == [text]


@pytest.mark.parametrize("command", [["seq", "eval", "--test", "t"], ["cls", "classify", "--input", "t"],
                                     ["cls", "eval", "--test", "t"]])
def test_the_other_commands_that_run_a_saved_model_refuse_a_batch_size_of_zero_too(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: list[str],
) -> None:
    assert main([*command, "--model", str(tmp_path / "no-model"), "--batch-size", "0"]) == 2
    assert _one_error_line(capsys.readouterr().err) == "--batch-size must be >= 1, got 0"


@pytest.mark.parametrize("engine", ["torch", "onnx"])
def test_a_model_option_naming_a_file_says_it_is_not_a_model_directory(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, engine: str,
) -> None:
    text = tmp_path / "in.txt"
    text.write_text("June 12 , 2005\n")
    for not_a_model in (text, model / "config.json"):
        assert main(["seq", "tag", "--model", str(not_a_model), "--input", str(text), "--device", "cpu",
                     "--engine", engine]) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert line == f"{not_a_model}: not a model directory (it is a file; give the model's folder)", line
    assert main(["seq", "tag", "--model", str(tmp_path / "missing"), "--input", str(text), "--device", "cpu"]) == 2
    assert _one_error_line(capsys.readouterr().err) == f"{tmp_path / 'missing'}: not a model directory (it does not exist)"


def test_tagging_into_the_input_file_is_refused_naming_both(model: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "in.txt"
    content = "June 12 , 2005\nMay 3 , 1999\n"
    text.write_text(content)
    (tmp_path / "link.txt").symlink_to(text)
    os.link(text, tmp_path / "hard.txt")
    for output in (text, tmp_path / "." / "in.txt", tmp_path / "link.txt", tmp_path / "hard.txt"):
        assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(output),
                     "--device", "cpu"]) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert line == f"--output {output} is the input file --input {text}: the output would replace it; " \
                       "write the output elsewhere", line
        assert text.read_text() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.txt", "in.txt", "link.txt"]
    # grobid MODEL tag, whose output option is --tag-output, and cls classify say the same
    assert main(["grobid", "date", "tag", "--output", str(model), "--input", str(text), "--input-format", "text",
                 "--tag-output", str(text), "--device", "cpu"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith(f"--tag-output {text} is the input file --input {text}: ")
    assert main(["cls", "classify", "--model", str(tmp_path / "no-model"), "--input", str(text),
                 "--output", str(text)]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith(f"--output {text} is the input file --input {text}: ")
    assert text.read_text() == content


# ------------------------------------------------------------------------ stopped by a signal
def _big_text(path: Path, n: int) -> list[str]:
    words = ["June", "May", "12", "2005", ",", "March", "1999", "Jan", "3"]
    lines = [" ".join(words[(i * 7 + j) % len(words)] for j in range(1 + i % 9)) for i in range(n)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return lines


def _written(out: Path, size: int) -> bool:
    """Whether the hidden temporary file of ``out`` holds ``size`` bytes."""
    for path in out.parent.glob(f".{out.name}.*"):
        try:
            if path.stat().st_size >= size:
                return True
        except FileNotFoundError:  # renamed meanwhile
            pass
    return False


def _stopped_run(model: Path, data: Path, input_format: str, out: Path, signum: int) -> tuple[int, str]:
    """``seq tag`` in a child process, sent ``signum`` once it has written into its temporary
    file beside ``out`` (64 kB of it): (exit status, stderr)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "textorch.cli.main", "seq", "tag", "--model", str(model), "--input", str(data),
               "--input-format", input_format, "--output", str(out), "--device", "cpu", "--chunk-sequences", "200"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=_signals_as_a_terminal_gives_them)
    try:
        deadline = time.monotonic() + 120
        while not _written(out, 1 << 16):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "nothing written within 120 s"
            time.sleep(0.02)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stderr


def _whole_sequences(partial: Path, input_format: str, sent: list[list[str]]) -> int:
    """How many sequences ``partial`` holds, each checked whole: the first ones of the input,
    token for token, each with its labels."""
    if input_format == "text":
        texts = json.loads(partial.read_text(encoding="utf-8"))["texts"]  # a complete JSON document
        assert [t["text"].split() for t in texts] == sent[:len(texts)]
        return len(texts)
    blocks = [block.splitlines() for block in partial.read_text(encoding="utf-8").strip("\n").split("\n\n")]
    for block, tokens in zip(blocks, sent):
        rows = [line.split() for line in block]
        assert [row[0] for row in rows] == tokens and all(len(row) == 6 for row in rows), block
    assert len(blocks) <= len(sent)
    return len(blocks)


@pytest.mark.parametrize("input_format", ["text", "grobid"])
def test_sigterm_stops_tagging_as_ctrl_c_does(model: Path, tmp_path: Path, input_format: str) -> None:
    """SIGTERM (``timeout``, systemd, docker, Slurm) during ``seq tag``: the same exit status
    and lines as SIGINT, the tagged sequences kept whole in ``OUTPUT.partial``, no temporary file
    left. Before, SIGTERM killed the process (143, no message, no .partial, the hidden
    temporary file left beside the output)."""
    if input_format == "text":
        data = tmp_path / "big.txt"
        sent = [line.split() for line in _big_text(data, 240_000)]  # enough that no run ends before its signal
    else:
        data = write_tiny_grobid(tmp_path / "big.grobid", 48_000)
        sent = [[row.split()[0] for row in block.splitlines() if row.strip()]
                for block in data.read_text().split("\n\n") if block.strip()]
    seen = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        out = tmp_path / signum.name / "tagged"
        out.parent.mkdir()
        code, stderr = _stopped_run(model, data, input_format, out, signum)
        assert "Traceback" not in stderr, stderr
        lines = [line for line in stderr.splitlines() if line.startswith("textorch:")]
        partial = out.with_name("tagged.partial")
        assert sorted(p.name for p in out.parent.iterdir()) == ["tagged.partial"], stderr  # no hidden file left
        n = _whole_sequences(partial, input_format, sent)
        unit = "texts" if input_format == "text" else "sequences"
        assert lines == [f"textorch: stopped; the {n} {unit} written before it are in {partial}",
                         "textorch: interrupted"], stderr
        seen[signum.name] = (code, [line.replace(str(partial), "PARTIAL").replace(f" {n} ", " N ") for line in lines])
    assert seen["SIGTERM"] == seen["SIGINT"] and seen["SIGINT"][0] == 130, seen


# --------------------------------------------------------------- a full file system
@pytest.mark.parametrize("input_format,engine", [("grobid", "torch"), ("text", "torch"), ("grobid", "onnx")])
def test_tagging_onto_a_full_disk_says_so_in_one_line_and_leaves_no_file(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, input_format: str, engine: str,
) -> None:
    """A write that fails (a full disk) mid-run: one line naming the output, exit 2, and neither
    a ``.partial`` (it could end in a cut line) nor the hidden temporary file left. Before: an
    ``OSError`` traceback, a ``.partial`` cut mid-line, and for text input the ``.tmp`` left."""
    data = write_tiny_grobid(tmp_path / "in.grobid", 1500)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "tagged"
    argv = ["seq", "tag", "--model", str(exported), "--input", str(data), "--output", str(out),
            "--input-format", input_format, "--device", "cpu", "--engine", engine, "--quiet"]
    with file_size_limit(20_000):
        code = main(argv)
    assert code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"{out}: cannot write the output (File too large)"), line
    assert sorted(p.name for p in out_dir.iterdir()) == []


# -------------------------------------------------------------------------- read-only places
def test_tagging_with_onnx_from_a_read_only_model_exports_to_a_temporary_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model directory on a read-only file system (``EROFS``, simulated: root writes through
    file modes) and no export: ``seq tag --engine onnx`` exports into a temporary folder, as
    ``serve`` does. Before, only ``PermissionError`` was caught: ``EROFS`` ended in a traceback."""
    import errno
    import tempfile

    from model_fixture import v1_model_dir

    model = v1_model_dir(tmp_path / "model")
    real_mkdtemp = tempfile.mkdtemp

    def read_only_model(*args: object, dir: str | Path | None = None, **kwargs: object) -> str:
        if dir is not None and Path(dir).resolve() == model.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
        return real_mkdtemp(*args, dir=dir, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tempfile, "mkdtemp", read_only_model)
    data = write_tiny_grobid(tmp_path / "in.grobid", 20)
    out = tmp_path / "tagged"
    assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--output", str(out),
                 "--input-format", "grobid", "--device", "cpu", "--engine", "onnx", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{model} is not writable ({model / 'onnx'}: cannot write the export " \
        "(Read-only file system)): exporting to ONNX in " in err, err
    assert out.read_text().count("\n\n") == 20 and not (model / "onnx").exists()


@pytest.mark.parametrize("place", ["a folder", "under a file"])
@pytest.mark.parametrize("command", ["tag --stats-json", "eval --metrics-json"])
def test_a_report_file_that_cannot_be_written_says_so_in_one_line(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, command: str, place: str,
) -> None:
    """``--stats-json`` / ``--metrics-json`` naming a folder or a path under a file (as a
    read-only place, a way to fail that root meets too): one line naming the option and the path.
    Before, an ``IsADirectoryError`` (or ``FileExistsError``) traceback after the work was done."""
    data = write_tiny_grobid(tmp_path / "in.grobid", 10)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file\n")
    report = tmp_path if place == "a folder" else blocker / "report.json"
    verb, option = command.split()
    argv = ["seq", verb, "--model", str(exported), "--device", "cpu", option, str(report)]
    argv += ["--input", str(data), "--input-format", "grobid", "--output", str(tmp_path / "out"), "--quiet"] \
        if verb == "tag" else ["--test", str(data)]
    assert main(argv) == 2
    line = _one_error_line(capsys.readouterr().err)
    why = "Is a directory" if place == "a folder" else f"{blocker} is a file, not a folder"
    assert line == f"{option} {report}: cannot write it ({why})", line
    assert blocker.read_text() == "a file\n"


# ---------------------------------------------------------------------- a name too long
@pytest.mark.parametrize("command", ["seq tag --output", "seq tag --stats-json", "export onnx --output"])
def test_an_output_name_too_long_says_so_in_one_line(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, command: str,
) -> None:
    """A 300-character file name (the limit is 255 bytes): one line naming it, exit 2. Before,
    ``seq tag --output`` and ``export onnx --output`` died in an ``OSError: File name too long``
    traceback (``Path.is_dir``/``exists`` raise it), before anything was tagged."""
    data = write_tiny_grobid(tmp_path / "in.grobid", 5)
    long_name = tmp_path / ("x" * 300)
    group, verb, option = command.split()
    argv = [group, verb, "--model", str(exported), option, str(long_name)]
    if group == "seq":
        argv += ["--input", str(data), "--input-format", "grobid", "--device", "cpu", "--quiet"]
        if option != "--output":
            argv += ["--output", str(tmp_path / "out")]
    assert main(argv) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(long_name) in line and line.endswith("(File name too long)"), line
