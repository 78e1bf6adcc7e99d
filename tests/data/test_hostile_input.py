"""Hostile input: whatever a file holds, a reader gives a correct result or a TextorchError.

Random bytes, invalid UTF-8, NUL bytes, mixed line endings, corrupt gzip and huge lines go
through every reader (sequence labelling, the validator, classification) and the tokeniser.
Any other exception is a bug, and so is a hang: each call runs under a watchdog that turns one
into a failure (a generous bound, not a timing assertion). Examples are bounded so that the
file runs in well under a minute.

Since an error is an allowed answer to hostile input, valid files are generated too, in every
layout the formats allow, and must be read to exactly the sequences and labels written.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
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


# ----------------------------------------------------------------------------- valid files
# A reader that rejects everything passes the tests above (a DataError is always allowed). Valid
# files, generated with what the formats allow (schemes, column counts, separators, blank-line
# styles, CRLF, BOM, gzip, quoting), must be read to the expected sequences, tokens, features and
# labels. Expected labels come from the generated fields, not from the library's converters.

_MARKERS = {"-DOCSTART-", "#begin", "#end"}
_TOKENS = st.text(st.characters(categories=("L", "M", "N", "P", "S")), min_size=1, max_size=6).filter(
    lambda token: token not in _MARKERS)
_CONLL_TYPES = ["PER", "LOC", "ORG", "MISC", "date-time"]
_GROBID_TYPES = ["month", "day", "year", "title", "other"]
_RUNS = st.lists(st.tuples(st.none() | st.sampled_from(_CONLL_TYPES), st.integers(1, 3)), min_size=1, max_size=4)


def _iob2(runs: list[tuple[str | None, int]]) -> list[str]:
    return [label for typ, n in runs for label in (["O"] * n if typ is None else [f"B-{typ}"] + [f"I-{typ}"] * (n - 1))]


def _written_tags(runs: list[tuple[str | None, int]], scheme: str) -> list[str]:
    """The tags of ``runs`` as a file in ``scheme`` writes them (IOB1: ``B-`` only between two
    entities of one type; IOBES: single-token entities ``S-``, last tokens ``E-``)."""
    tags, previous = [], None
    for typ, n in runs:
        if typ is None:
            tags += ["O"] * n
        elif scheme == "iob2":
            tags += [f"B-{typ}"] + [f"I-{typ}"] * (n - 1)
        elif scheme == "iob1":
            tags += [f"{'B' if previous == typ else 'I'}-{typ}"] + [f"I-{typ}"] * (n - 1)
        else:
            tags += [f"S-{typ}"] if n == 1 else [f"B-{typ}"] + [f"I-{typ}"] * (n - 2) + [f"E-{typ}"]
        previous = typ
    return tags


def _layout(draw: st.DrawFn, lines: list[list[str]], blank_ends: list[int]) -> bytes:
    """Field lines joined with runs of spaces or tabs, blank lines of any style after the lines
    listed in ``blank_ends`` (maybe not after the last), LF or CRLF, with or without a BOM and a
    final newline."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    out = ["" for _ in range(rng.randint(0, 1))]
    for i, fields in enumerate(lines):
        out.append(rng.choice([" ", "\t", "  ", " \t"]).join(fields))
        if i in blank_ends and (i < len(lines) - 1 or rng.random() < 0.5):
            out += [rng.choice(["", " ", "\t", " \t "]) for _ in range(rng.randint(1, 2))]
    text = rng.choice(["\n", "\r\n"]).join(out) + rng.choice(["", "\n"])
    return (rng.choice(["", "\ufeff"]) + text).encode("utf-8")


@st.composite
def _conll_files(draw: st.DrawFn) -> tuple[bytes, list[tuple[list[str], list[str]]], int]:
    """A CoNLL file: (bytes, expected (tokens, IOB2 labels) per sequence, column count)."""
    scheme = draw(st.sampled_from(["iob1", "iob2", "iobes"]))
    columns = draw(st.integers(2, 4))
    expected, lines, ends = [], [], []
    for runs in draw(st.lists(_RUNS, min_size=1, max_size=5)):
        tags = _written_tags(runs, scheme)
        tokens = draw(st.lists(_TOKENS, min_size=len(tags), max_size=len(tags)))
        if draw(st.booleans()) and not lines:
            lines.append(["-DOCSTART-"] + ["-X-"] * (columns - 2) + ["O"])
            ends.append(len(lines) - 1)
        middle = [draw(st.lists(_TOKENS, min_size=columns - 2, max_size=columns - 2)) for _ in tags]
        lines += [[token, *between, tag] for token, between, tag in zip(tokens, middle, tags)]
        ends.append(len(lines) - 1)
        expected.append((tokens, _iob2(runs)))
    return _layout(draw, lines, ends), expected, columns


@st.composite
def _grobid_files(draw: st.DrawFn) -> tuple[bytes, list[tuple[list[str], list[list[str]], list[str]]], int]:
    """A GROBID feature file: (bytes, expected (tokens, features, IOB2 labels) per sequence, feature count).
    A field opens with ``I-<x>`` and goes on with ``<x>``; ``<other>`` fields are outside (``O``)."""
    n_features = draw(st.integers(0, 4))
    expected, lines, ends = [], [], []
    for runs in draw(st.lists(st.lists(st.tuples(st.sampled_from(_GROBID_TYPES), st.integers(1, 3)), min_size=1, max_size=4),
                              min_size=1, max_size=5)):
        written = [label for typ, n in runs for label in [f"I-<{typ}>"] + [f"<{typ}>"] * (n - 1)]
        labels = _iob2([(None if typ == "other" else f"<{typ}>", n) for typ, n in runs])
        tokens = draw(st.lists(_TOKENS, min_size=len(written), max_size=len(written)))
        features = [draw(st.lists(_TOKENS, min_size=n_features, max_size=n_features)) for _ in written]
        lines += [[token, *values, label] for token, values, label in zip(tokens, features, written)]
        ends.append(len(lines) - 1)
        expected.append((tokens, features, labels))
    return _layout(draw, lines, ends), expected, n_features


def _write(tmp_path: Path, name: str, data: bytes, compress: bool) -> Path:
    path = tmp_path / (name + ".gz" if compress else name)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _read_every_way(path: Path, fmt: str, reader: Callable[[Path], Corpus], n_lines: int) -> list[Corpus]:
    """``path`` detected as ``fmt`` and read by its reader, by read_labelled (told the format and
    not) and by the validator, which finds nothing wrong; every corpus a valid one."""
    with watchdog():
        assert detect_format(path) == fmt
        check = check_file(path)
        corpora = [reader(path), read_labelled(path), read_labelled(path, fmt), check.corpus]
    assert check.errors == []
    for corpus in corpora:
        _check_labelled(corpus, n_lines)
        assert corpus.format == fmt
    return corpora


@_HYPOTHESIS
@given(file=_conll_files(), compress=st.booleans())
def test_valid_conll_files_are_read_whole(tmp_path: Path, file: tuple, compress: bool) -> None:
    data, expected, columns = file
    path = _write(tmp_path, "f.conll", data, compress)
    for corpus in _read_every_way(path, "conll", read_conll, _lines_of(data)):
        assert [(s.tokens, s.labels) for s in corpus.sequences] == expected
        assert corpus.extra["columns"] == columns
    assert [s.tokens for s in read_conll(path, labelled=False).sequences] == [tokens for tokens, _ in expected]


@_HYPOTHESIS
@given(file=_grobid_files(), compress=st.booleans())
def test_valid_grobid_files_are_read_whole(tmp_path: Path, file: tuple, compress: bool) -> None:
    data, expected, n_features = file
    path = _write(tmp_path, "f.train", data, compress)
    for corpus in _read_every_way(path, "grobid", read_grobid, _lines_of(data)):
        assert [(s.tokens, s.features, s.labels) for s in corpus.sequences] == expected
        assert corpus.n_features == n_features
    unlabelled = read_grobid(path, labelled=False, n_features=n_features)
    assert [(s.tokens, s.features) for s in unlabelled.sequences] == [(t, f) for t, f, _ in expected]


_CLASSES = ["positive", "negative", "neutral"]
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\r\x00"), min_size=1, max_size=30).filter(str.strip)


@st.composite
def _table_files(draw: st.DrawFn) -> tuple[str, bytes, list[tuple[str, tuple[str, ...], int]], bool]:
    """A CSV (quoted by the csv module: commas, quotes and newlines inside texts) or TSV file with a
    header, an optional id column, one label column or 0/1 indicator columns:
    (name, bytes, expected (text, labels, first line) per record, multi-label)."""
    tsv, multi = draw(st.booleans()), draw(st.booleans())
    texts = draw(st.lists(_TEXT.filter(lambda t: "\t" not in t and "\n" not in t) if tsv else _TEXT, min_size=1, max_size=8))
    label_names = ["alpha", "beta"] if multi else ["label"]
    header = ["text", *label_names]
    if draw(st.booleans()):
        header.insert(draw(st.integers(0, len(header))), "id")
    rows, expected, line = [], [], 2
    for i, text in enumerate(texts):
        if multi:
            values = draw(st.lists(st.sampled_from(["0", "1", "true", "false", "yes", "no", ""]), min_size=2, max_size=2))
            labels = tuple(name for name, value in zip(label_names, values) if value in ("1", "true", "yes"))
        else:
            values = [draw(st.sampled_from(_CLASSES))]
            labels = (values[0],)
        cells = {"text": text, "id": str(i), **dict(zip(label_names, values))}
        rows.append([cells[name] for name in header])
        expected.append((text, labels, line))
        line += 1 + text.count("\n")
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    if tsv:  # no quoting in TSV: fields are written as they are
        return "f.tsv", "".join("\t".join(row) + ending for row in [header, *rows]).encode("utf-8"), expected, multi
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=ending).writerows([header, *rows])
    return "f.csv", buffer.getvalue().encode("utf-8"), expected, multi


@_HYPOTHESIS
@given(file=_table_files(), compress=st.booleans())
def test_valid_csv_and_tsv_files_are_read_whole(tmp_path: Path, file: tuple, compress: bool) -> None:
    from textorch.data.cls_readers import read_cls

    name, data, expected, multi = file
    path = _write(tmp_path, name, data, compress)
    with watchdog():
        corpus = read_cls(path, label_columns=["alpha", "beta"] if multi else ())
        unlabelled = read_cls(path, labelled=False)
    assert [(e.text, e.labels, e.line) for e in corpus.examples] == expected
    assert corpus.multi_label == multi and corpus.format == name[2:5]
    assert [(e.text, e.labels, e.line) for e in unlabelled.examples] == [(t, None, n) for t, _, n in expected]


@st.composite
def _jsonl_files(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, tuple[str, ...], int]], bool]:
    """JSON lines with a string or a list of classes as label, other fields, blank lines between."""
    lines, expected, multi = [], [], False
    for text in draw(st.lists(_TEXT | st.text(min_size=1, max_size=10).filter(str.strip), min_size=1, max_size=8)):
        lines += [""] * draw(st.integers(0, 1))
        label = draw(st.sampled_from(_CLASSES) | st.lists(st.sampled_from(_CLASSES), max_size=3))
        multi = multi or isinstance(label, list)
        record = {"text": text, "label": label, "id": len(lines)}
        keys = draw(st.permutations(list(record)))
        lines.append(json.dumps({key: record[key] for key in keys}, ensure_ascii=draw(st.booleans())))
        expected.append((text, tuple(sorted(set(label))) if isinstance(label, list) else (label,), len(lines)))
    return ("\n".join(lines) + "\n").encode("utf-8"), expected, multi


@_HYPOTHESIS
@given(file=_jsonl_files(), compress=st.booleans())
def test_valid_json_lines_are_read_whole(tmp_path: Path, file: tuple, compress: bool) -> None:
    from textorch.data.cls_readers import read_cls

    data, expected, multi = file
    path = _write(tmp_path, "f.jsonl", data, compress)
    with watchdog():
        corpus = read_cls(path)
    assert [(e.text, e.labels, e.line) for e in corpus.examples] == expected
    assert corpus.multi_label == multi and corpus.format == "jsonl"


@_HYPOTHESIS
@given(lines=st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=30), min_size=1, max_size=8))
def test_valid_text_files_are_read_line_by_line(tmp_path: Path, lines: list[str]) -> None:
    """One sequence per line for tagging (empty lines too), one text per line for ``cls classify``."""
    from textorch.data.cls_readers import read_cls

    path = tmp_path / "f.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with watchdog():
        corpus = read_text(path)
    _check_text(corpus, len(lines))
    assert [s.text for s in corpus.sequences] == lines
    assert [s.tokens for s in corpus.sequences] == [tokenize(line)[0] for line in lines]
    if all(line.strip() for line in lines):
        assert [e.text for e in read_cls(path, format="text", labelled=False).examples] == lines
