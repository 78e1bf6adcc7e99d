"""Hostile input: whatever a file holds, a reader gives a correct result or a TextorchError.

Random bytes, invalid UTF-8, NUL bytes, mixed line endings, corrupt gzip and huge lines go
through every reader (sequence labelling, the validator, classification) and the tokeniser.
Any other exception is a bug, and so is a hang: each call runs under a watchdog that turns one
into a failure (a generous bound, not a timing assertion). Examples are bounded so that the
file runs in well under a minute.
"""

from __future__ import annotations

import gzip
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from textorch.data.corpus import Corpus
from textorch.data.readers import detect_format, read_conll, read_grobid, read_labelled, read_text
from textorch.data.tokenize import tokenize
from textorch.data.validate import check_file
from textorch.errors import TextorchError

WATCHDOG_S = 20

# ----------------------------------------------------------------------------- helpers


class Hang(Exception):
    """Raised by the watchdog; never caught by the code under test (it is not a TextorchError)."""


@contextmanager
def watchdog(seconds: float = WATCHDOG_S) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise Hang(f"no answer after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _lines_of(data: bytes) -> int:
    return data.count(b"\n") + 1


def _check_labelled(corpus: Corpus, n_lines: int) -> None:
    """What any corpus read from a labelled file must satisfy."""
    assert corpus.format in ("conll", "grobid")
    for sequence in corpus.sequences:
        assert sequence.tokens, "empty sequence"
        assert all(token and " " not in token and "\t" not in token and "\n" not in token
                   for token in sequence.tokens)
        assert 1 <= sequence.line <= n_lines
        if sequence.labels is not None:
            assert len(sequence.labels) == len(sequence.tokens)
            assert all(label == "O" or label[:2] in ("B-", "I-") and len(label) > 2 for label in sequence.labels)
        if corpus.format == "grobid":
            assert all(len(features) == corpus.n_features for features in sequence.features)


def _check_text(corpus: Corpus, n_lines: int) -> None:
    assert [s.line for s in corpus.sequences] == list(range(1, len(corpus) + 1))
    assert len(corpus) <= n_lines
    for sequence in corpus.sequences:
        assert "\n" not in sequence.text
        assert [sequence.text[b:e] for b, e in sequence.offsets] == sequence.tokens


def _labelled(reader: Callable[[Path], Corpus]) -> Callable[[Path, int], None]:
    return lambda path, n_lines: _check_labelled(reader(path), n_lines)


def _validated(path: Path, n_lines: int) -> None:
    """The validator reports instead of raising, and its corpus is a valid corpus."""
    check = check_file(path)
    if check.corpus is not None:
        _check_labelled(check.corpus, n_lines)
    assert check.errors or check.corpus is not None


def _cls_readers() -> dict[str, Callable[[Path, int], None]]:
    """The classification readers, when that module exists (it came with a later issue)."""
    try:
        from textorch.data import cls_readers
    except ImportError:
        return {}

    def read(fmt: str | None, labelled: bool) -> Callable[[Path, int], None]:
        def run(path: Path, n_lines: int) -> None:
            corpus = cls_readers.read_cls(path, format=fmt, labelled=labelled)
            assert corpus.examples
            for example in corpus.examples:
                assert isinstance(example.text, str) and example.text.strip()
                assert 1 <= example.line <= n_lines
                assert example.labels is None or all(isinstance(label, str) for label in example.labels)
        return run

    readers = {f"read_cls[{fmt}]": read(fmt, True) for fmt in cls_readers.CLS_FORMATS}
    readers["read_cls[text]"] = read("text", False)
    readers["read_cls[csv, unlabelled]"] = read("csv", False)
    readers["cls detect_format"] = lambda path, n: cls_readers.detect_format(path, labelled=False)
    return readers


READERS: dict[str, Callable[[Path, int], None]] = {
    "read_conll": _labelled(read_conll),
    "read_conll[unlabelled]": lambda path, n: _check_labelled(read_conll(path, labelled=False), n),
    "read_grobid": _labelled(read_grobid),
    "read_grobid[unlabelled]": lambda path, n: _check_labelled(read_grobid(path, labelled=False), n),
    "read_grobid[unlabelled, 2 features]": lambda path, n: _check_labelled(
        read_grobid(path, labelled=False, n_features=2), n),
    "read_labelled": _labelled(read_labelled),
    "read_labelled[conll]": _labelled(lambda path: read_labelled(path, "conll")),
    "read_labelled[grobid]": _labelled(lambda path: read_labelled(path, "grobid")),
    "detect_format": lambda path, n: detect_format(path) in ("conll", "grobid") or pytest.fail("bad format"),
    "read_text": lambda path, n: _check_text(read_text(path), n),
    "check_file (validator)": _validated,
    **_cls_readers(),
}


def _survive(path: Path, data: bytes) -> None:
    """Every reader on one file: a correct result or a TextorchError, within the watchdog."""
    n_lines = _lines_of(data)
    for name, reader in READERS.items():
        try:
            with watchdog():
                reader(path, n_lines)
        except TextorchError:
            pass
        except Hang:
            pytest.fail(f"{name} hangs on {data[:200]!r}...")


# ----------------------------------------------------------------------------- strategies

_FRAGMENTS = [
    b"a", b"June", b"12", b"\xc3\xa9t\xc3\xa9", b"O", b"B-PER", b"I-PER", b"E-LOC", b"S-X", b"B-", b"I-<x>",
    b"<x>", b"I-<other>", b"<other>", b"-DOCSTART-", b"#begin", b"document", b"text", b"label", b'"',
    b",", b"\t", b" ", b"  ", b"\n", b"\r\n", b"\r", b"\n\n", b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80",
    b"\xef\xbb\xbf", b"\xe2\x80\xa8", b"\xc2\x85", b"\x0b", b"\x1c", b"{", b"}", b"[", b":", b"1", b"n",
    b'{"text": "x", "label": "y"}', b"\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb",
]
_STRUCTURED = st.lists(st.sampled_from(_FRAGMENTS), max_size=60).map(b"".join)
_BYTES = st.one_of(st.binary(max_size=400), _STRUCTURED)
_NAMES = st.sampled_from(["f.txt", "f.conll", "f.train", "f.csv", "f.tsv", "f.jsonl", "f.conll.gz"])
_HYPOTHESIS = settings(max_examples=60, deadline=None, database=None,
                       suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@_HYPOTHESIS
@given(data=_BYTES, name=_NAMES, compress=st.booleans())
def test_every_reader_survives_any_bytes(tmp_path: Path, data: bytes, name: str, compress: bool) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if compress and name.endswith(".gz") else data)
    _survive(path, data)


@_HYPOTHESIS
@given(data=st.binary(min_size=1, max_size=200))
def test_corrupt_gzip_is_a_data_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "f.conll.gz"
    path.write_bytes(gzip.compress(b"a O\n" * 50)[: len(data)] + data)
    _survive(path, data)


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(st.characters(exclude_categories=()), max_size=200) | st.binary(max_size=200).map(
    lambda raw: raw.decode("utf-8", errors="surrogateescape")))
def test_tokenizer_on_any_string(text: str) -> None:
    """Lone surrogates (from undecodable bytes) included: offsets always give the tokens back."""
    with watchdog():
        tokens, offsets = tokenize(text)
    assert [text[b:e] for b, e in offsets] == tokens
    assert all(not token.isspace() and token for token in tokens)
    assert all(e1 <= b2 for (_, e1), (b2, _) in zip(offsets, offsets[1:]))


# ----------------------------------------------------------------------------- huge and odd inputs

HUGE = {
    "one 2 MB token": b"x" * 2_000_000 + b" O\n",
    "200k fields on a line": b"a " * 200_000 + b"O\n",
    "50k lines, mixed line endings": b"".join(b"a O\r\n" if i % 2 else b"b B-X\n" for i in range(50_000)),
    "1 MB of NUL": b"\x00" * 1_000_000,
    "1 MB of punctuation on one line": b".," * 500_000,
    "1 MB of combining marks": "\u0301".encode() * 500_000,
    "invalid UTF-8 on every line": b"a\xff O\n" * 50_000,
    "100k blank lines": b" \n\t\n\r\n" * 35_000,
    "deeply nested JSON": b'{"text": "a", "label": ' + b"[" * 100_000 + b"\n",
    "a 5000-digit number in JSON": b'{"text": "a", "label": ' + b"7" * 5000 + b"}\n",
    "a 200 kB CSV field": b"x" * 200_000 + b",y\n",
}


@pytest.mark.parametrize("name", list(HUGE))
def test_huge_inputs(tmp_path: Path, name: str) -> None:
    data = HUGE[name]
    path = tmp_path / "huge.txt"
    path.write_bytes(data)
    _survive(path, data)


def test_huge_inputs_give_the_right_answers(tmp_path: Path) -> None:
    path = tmp_path / "f.conll"
    path.write_bytes(HUGE["50k lines, mixed line endings"])
    corpus = read_conll(path)
    assert len(corpus) == 1 and len(corpus.sequences[0]) == 50_000
    path.write_bytes(HUGE["one 2 MB token"])
    assert read_conll(path).sequences[0].tokens == ["x" * 2_000_000]
    path.write_bytes(HUGE["1 MB of punctuation on one line"])
    assert len(read_text(path).sequences[0].tokens) == 1_000_000
    path.write_bytes(HUGE["invalid UTF-8 on every line"])
    check = check_file(path, format="conll")
    assert len(check.errors) == 50_000 and check.errors[-1].line == 50_000


@pytest.mark.parametrize("make", [
    lambda tmp: tmp / ("x" * 300),          # a name longer than the file system allows
    lambda tmp: tmp / "a\x00b",             # NUL in the name
    lambda tmp: tmp / "absent" / "f.conll",
    lambda tmp: tmp,                        # a directory
])
def test_bad_paths_are_data_errors(tmp_path: Path, make: Callable[[Path], Path]) -> None:
    path = make(tmp_path)
    for name, reader in READERS.items():
        if name.startswith("cls detect_format"):
            continue  # it goes by the name alone and needs no file
        try:
            reader(path, 1)
        except TextorchError as exc:
            assert str(path)[:20] in str(exc) or name.startswith("check_file")
        else:
            assert name.startswith("check_file"), f"{name} read {path}"
    assert check_file(path).fatal
