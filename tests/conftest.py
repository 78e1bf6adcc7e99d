"""Shared fixtures: tiny corpora written on the fly and the location of ../shared."""

from __future__ import annotations

import os
import resource
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

# Tiny test models gain nothing from several threads, and with other jobs on the machine
# torch's default intra-op threads thrash (a 10x slow-down was seen on 2 busy cores). Set before
# torch is imported so subprocesses started by the tests (CLI, torchrun workers) inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Tests train many tiny models: the ONNX export and int8 check each would get after training
# would cost more than most of those trainings. tests/onnx/test_trained_export.py turns it back on.
os.environ.setdefault("TEXTORCH_DISABLE_TRAINING_EXPORT", "1")

# Keep hypothesis' example cache out of the working tree (tests write only under tmp dirs).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(os.environ.get("TMPDIR", "/tmp")) / "textorch-hypothesis"))

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One torch thread in the test process, module-scoped fixtures included (see
    OMP_NUM_THREADS above: the 2-core machine is shared, two threads fight for a core)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """Test modules are imported with bytecode writing on, the flag set back afterwards.

    pytest rewrites each test module's asserts and keeps the result beside it in ``__pycache__``
    (git-ignored), but writes nothing where ``PYTHONDONTWRITEBYTECODE`` is set: then every worker
    of every run parses and rewrites all the test modules again, a large part of its start. The
    Makefile compiles textorch's own modules once for the same reason."""
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = before


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that start other processes first: they are the suite's longest, and when the suite
    runs on several workers (``make test``: pytest-xdist, one file per worker at a time) a long
    file taken last would leave the other workers idle at the end. The rest keep their order.
    xdist keeps this order of files only with ``--no-loadscope-reorder`` (the Makefile passes it)."""
    items.sort(key=lambda item: item.get_closest_marker("processes") is None)


def shared_dir(kind: str) -> Path:
    """``../shared/<kind>`` beside the checkout, or the directory named by an env variable."""
    env = {"data": "TEXTORCH_SHARED_DATA", "embeddings": "TEXTORCH_SHARED_EMBEDDINGS"}[kind]
    return Path(os.environ.get(env, REPO.parent / "shared" / kind))


def require_shared(relative: str, kind: str = "data") -> Path:
    path = shared_dir(kind) / relative
    if not path.exists():
        pytest.skip(f"{path} not found: real-data test needs ../shared (or set TEXTORCH_SHARED_{kind.upper()})")
    return path


GROBID_LINES = [
    ("June", ["june", "LINESTART", "INITCAP", "NOPUNCT"], "I-<month>"),
    ("12", ["12", "LINEIN", "NOCAPS", "NOPUNCT"], "I-<day>"),
    (",", [",", "LINEIN", "ALLCAP", "COMMA"], "I-<other>"),
    ("2005", ["2005", "LINEEND", "NOCAPS", "NOPUNCT"], "I-<year>"),
]


def write_tiny_grobid(path: Path, n: int = 40) -> Path:
    """A small GROBID-style date file with 4 feature columns, varied enough to learn from."""
    months = ["June", "May", "March", "July", "Jan"]
    lines = []
    for i in range(n):
        month, day, year = months[i % 5], str(1 + i % 28), str(1990 + i % 30)
        rows = [(month, "I-<month>"), (day, "I-<day>"), (",", "I-<other>"), (year, "I-<year>")]
        if i % 3 == 0:
            rows = [(day, "I-<day>"), (month, "I-<month>"), (year, "I-<year>")]
        for j, (token, label) in enumerate(rows):
            position = "LINESTART" if j == 0 else ("LINEEND" if j == len(rows) - 1 else "LINEIN")
            caps = "INITCAP" if token[0].isupper() else "NOCAPS"
            punct = "COMMA" if token == "," else "NOPUNCT"
            lines.append(f"{token} {token.lower()} {position} {caps} {punct} {label}")
        lines.append("")
        lines.append(" ")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def trained_once(cache: dict, key: str, train):
    """``train()`` once per ``key`` for a whole test module (training dominates such modules'
    time), handed out with the PyTorch engine in fp32 (a test may have attached ONNX or set bf16)."""
    if key not in cache:
        cache[key] = train()
    labeler = cache[key]
    labeler.runner = None
    labeler.precision = "fp32"
    return labeler


def viterbi_from_crf_json(emissions, crf: dict) -> list[int]:
    """Best label ids of one sequence's ``(L, T)`` emissions from an export's ``crf.json`` alone,
    written as another program would (NumPy, no textorch)."""
    import numpy as np

    trans, start, end = (np.asarray(crf[k]) for k in ("transitions", "start", "end"))
    score, back = start + emissions[0], []
    for t in range(1, len(emissions)):
        total = score[:, None] + trans + emissions[t][None, :]
        back.append(total.argmax(axis=0))
        score = total.max(axis=0)
    path = [int((score + end).argmax())]
    for pointers in reversed(back):
        path.append(int(pointers[path[-1]]))
    return path[::-1]


def cli_trained_tagger(model: Path, data: Path) -> Path:
    """A BidLSTM_CRF tagger trained for one epoch through ``textorch seq train``."""
    from textorch.cli.main import main

    assert main(["seq", "train", "--train", str(data), "--output", str(model), "--max-epoch", "1",
                 "--batch-size", "8", "--early-stop", "false"]) == 0
    return model


def cli_tagged_rows(model: Path, data: Path, input_format: str, output: Path, *options: str) -> list[list[str]]:
    """The columns of every token line ``textorch seq tag`` writes for ``data`` with ``options``."""
    from textorch.cli.main import main

    assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", input_format,
                 "--output", str(output), *options]) == 0
    return [line.split() for line in output.read_text().splitlines() if line.strip()]


def write_tiny_conll(path: Path, n: int = 40) -> Path:
    """A small 4-column IOB1 CoNLL file."""
    people = ["John", "Mary", "Peter", "Anna"]
    places = ["Paris", "Berlin", "Rome", "Madrid"]
    lines = ["-DOCSTART- -X- O O", ""]
    for i in range(n):
        person, place = people[i % 4], places[(i // 4) % 4]
        lines += [f"{person} NNP I-NP I-PER", "lives VBZ I-VP O", "in IN I-PP O", f"{place} NNP I-NP I-LOC", ". . O O", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    """The tiny GROBID date corpus (24 sequences with feature columns), read once per test module;
    a module may define its own ``corpus`` instead."""
    from textorch.data.readers import read_labelled

    return read_labelled(write_tiny_grobid(tmp_path_factory.mktemp("data") / "date.train", n=24))


@pytest.fixture
def tiny_grobid(tmp_path: Path) -> Path:
    return write_tiny_grobid(tmp_path / "tiny-date.train")


@pytest.fixture
def tiny_conll(tmp_path: Path) -> Path:
    return write_tiny_conll(tmp_path / "tiny.conll")


@contextmanager
def file_size_limit(size: int) -> Iterator[None]:
    """Writes past ``size`` bytes of any file fail with ``EFBIG``, as on a full disk they fail with
    ``ENOSPC``: every writer (Python, safetensors' Rust, torch's C++) meets a real failed write.
    SIGXFSZ is ignored meanwhile (it would kill the process); both are set back afterwards.
    Numba's compiled CRF kernel is loaded first: compiling it under the limit would fail to
    write its cache and leave the rest of the test process decoding with NumPy."""
    from textorch.models.cpu_decoder import preload

    preload()
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


class CliResult(NamedTuple):
    returncode: int
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture) -> Callable[[list[str]], CliResult]:
    """``run_cli(args)``: a command in this process (a process start would cost more than the
    command), its exit status as ``main`` returns it or argparse exits with it, and what it wrote
    to stderr. tests/cli/test_cli.py keeps one real ``python -m textorch.cli.main`` process."""
    from textorch.cli.main import main

    def run(args: list[str]) -> CliResult:
        capsys.readouterr()
        try:
            code = main(args)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        return CliResult(code, capsys.readouterr().err)

    return run
