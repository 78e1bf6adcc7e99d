"""Readers and writers: CoNLL, GROBID and plain text, good and malformed, plus the real data."""

from __future__ import annotations

import collections
import gzip
import io
import os
from pathlib import Path
from typing import Callable

import pytest

from textorch.data.corpus import Corpus
from textorch.data.readers import (
    detect_format,
    read_conll,
    read_grobid,
    read_labelled,
    read_text,
)
from textorch.data.streams import stream_grobid
from textorch.data.tags import iob2_to_grobid
from textorch.data.writers import write_conll, write_grobid
from textorch.errors import ConfigError, DataError


def _shared_data() -> Path:
    default = Path(__file__).resolve().parents[3] / "shared" / "data"
    return Path(os.environ.get("TEXTORCH_SHARED_DATA", default))


def _real(*parts: str) -> Path:
    path = _shared_data().joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found: set TEXTORCH_SHARED_DATA")
    return path


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    return path


def _error(func: Callable[..., object], *args: object, **kwargs: object) -> DataError:
    with pytest.raises(DataError) as info:
        func(*args, **kwargs)
    return info.value


CONLL_IOB1 = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
in IN I-PP O
Paris NNP I-NP I-LOC
Lyon NNP I-NP B-LOC


-DOCSTART- -X- O O

Bonn NNP I-NP I-LOC
"""


# ----------------------------------------------------------------------------- CoNLL


def test_conll_four_columns_iob1(tmp_path: Path) -> None:
    corpus = read_conll(_write(tmp_path, "a.conll", CONLL_IOB1))
    assert corpus.format == "conll" and corpus.n_features == 0
    assert corpus.extra["columns"] == 4
    assert corpus.extra["scheme"] == "iob1"
    assert corpus.extra["doc_starts"] == [0, 2]
    assert [s.tokens for s in corpus.sequences] == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn", "in", "Paris", "Lyon"],
        ["Bonn"],
    ]
    assert [s.labels for s in corpus.sequences] == [
        ["B-ORG", "O", "B-MISC", "O", "O"],
        ["B-PER", "I-PER", "O", "B-LOC", "B-LOC"],
        ["B-LOC"],
    ]
    assert [s.line for s in corpus.sequences] == [3, 9, 18]
    assert all(s.features is None for s in corpus.sequences)


def test_conll_two_columns_tabs_crlf_and_whitespace(tmp_path: Path) -> None:
    text = ("a\tB-PER\r\nb  \t I-PER  \r\n \t \r\n\r\n\r\nc\tO\r\n"
            "#begin document (x); part 0\r\nd\tS-LOC")
    corpus = read_conll(_write(tmp_path, "b.tsv", text))
    assert corpus.extra["columns"] == 2
    assert [s.tokens for s in corpus.sequences] == [["a", "b"], ["c"], ["d"]]
    assert [s.labels for s in corpus.sequences] == [["B-PER", "I-PER"], ["O"], ["B-LOC"]]
    assert [s.line for s in corpus.sequences] == [1, 6, 8]
    assert corpus.extra["scheme"] == "iobes"
    assert corpus.extra["doc_starts"] == [2]


def test_conll_three_columns_and_end_document(tmp_path: Path) -> None:
    text = "#begin document a\nx NN E-ORG\ny NN O\n#end document\n#begin document b\nz NN I-PER\n"
    corpus = read_conll(_write(tmp_path, "c.conll", text))
    assert corpus.extra["columns"] == 3
    assert [s.labels for s in corpus.sequences] == [["B-ORG", "O"], ["B-PER"]]
    assert corpus.extra["doc_starts"] == [0, 1]


def test_conll_gzip(tmp_path: Path) -> None:
    corpus = read_conll(_write(tmp_path, "a.conll.gz", CONLL_IOB1))
    assert len(corpus) == 3


def test_conll_empty_file(tmp_path: Path) -> None:
    corpus = read_conll(_write(tmp_path, "e.conll", "\n\n-DOCSTART- -X- O O\n\n"))
    assert len(corpus) == 0 and corpus.extra["columns"] == 0


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a NN I-NP O\nb NN O\n", 2, "expected 4 columns (as on line 1), found 3"),
        ("\n\na O\nb NN I-NP O\n", 4, "expected 2 columns (as on line 3), found 4"),
        ("a O\nb X-PER\n", 2, "invalid tag 'X-PER'"),
        ("a O\nb B-\n", 2, "invalid tag 'B-'"),
        ("a O\nlonely\n", 2, "expected 2 columns (as on line 1), found 1"),
        ("lonely\n", 1, "expected 2 to 4 columns"),
        ("a b c d O\n", 1, "expected 2 to 4 columns (token ... tag), found 5"),
    ],
)
def test_conll_malformed(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = _write(tmp_path, "bad.conll", text)
    error = _error(read_conll, path)
    assert error.line == line
    assert str(error).startswith(f"{path}:{line}: ")
    assert fragment in str(error)


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.conll", b"a O\nb O\n\nc\xff\xfe O\n")
    error = _error(read_conll, path)
    assert error.line == 4 and "invalid UTF-8" in str(error)
    assert str(error).startswith(f"{path}:4: ")
    gz = _write(tmp_path, "bad.conll.gz", b"a O\n\xc3\n")
    assert _error(read_conll, gz).line == 2


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.conll"
    for reader in (read_conll, read_grobid, read_text, detect_format, read_labelled):
        error = _error(reader, missing)
        assert str(error) == f"{missing}: file not found"
    corrupt = tmp_path / "x.conll.gz"
    corrupt.write_bytes(b"not gzip at all")
    assert "cannot read file" in str(_error(read_conll, corrupt))
    truncated = tmp_path / "t.conll.gz"
    truncated.write_bytes(gzip.compress(b"a O\n" * 1000)[:-8])
    assert "cannot read file" in str(_error(read_conll, truncated))
    assert "not a regular file" in str(_error(read_conll, tmp_path))


# ----------------------------------------------------------------------------- GROBID


GROBID_DATE = (
    "June june J Ju I-<month>\n"
    "3 3 3 3 I-<day>\n"
    ", , , , I-<other>\n"
    "2009 2009 2 20 I-<year>\n"
    "\n \n"
    "on on o on I-<other>\n"
    "the the t th <other>\n"
    "1st 1st 1 1s I-<day>\n"
    "of of o of <day>\n"
    "\n \n"
)


def test_grobid_labelled(tmp_path: Path) -> None:
    corpus = read_grobid(_write(tmp_path, "d.train", GROBID_DATE))
    assert corpus.format == "grobid" and corpus.n_features == 3
    assert corpus.extra == {"fields": 5, "labelled": True, "common_features": 3}
    first, second = corpus.sequences
    assert first.tokens == ["June", "3", ",", "2009"]
    assert first.labels == ["B-<month>", "B-<day>", "O", "B-<year>"]
    assert first.features[0] == ["june", "J", "Ju"]
    assert second.labels == ["O", "O", "B-<day>", "I-<day>"]
    assert (first.line, second.line) == (1, 7)


def test_grobid_separators_and_missing_final_newline(tmp_path: Path) -> None:
    text = "a f I-<x>\nb  f\t<x>\n \n\t\n\nc f I-<y>"
    corpus = read_grobid(_write(tmp_path, "s.train", text))
    assert [s.tokens for s in corpus.sequences] == [["a", "b"], ["c"]]
    assert [s.labels for s in corpus.sequences] == [["B-<x>", "I-<x>"], ["B-<y>"]]


def test_grobid_dangling_continuation_is_tolerated(tmp_path: Path) -> None:
    corpus = read_grobid(_write(tmp_path, "c.train", "a <x>\nb I-<other>\nc <y>\n"))
    assert corpus.sequences[0].labels == ["I-<x>", "O", "I-<y>"]
    assert corpus.n_features == 0


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("a f g I-<x>\nb f I-<x>\n", 2, "expected 4 fields (as on line 1), found 3"),
        ("\n \na f I-<x>\nb f g h <x>\n", 4, "expected 3 fields (as on line 3), found 5"),
        ("a f I-<x>\nb f B-<x>\n", 2, "invalid GROBID label 'B-<x>'"),
        ("a f O\n", 1, "invalid GROBID label 'O'"),
        ("lonely\n", 1, "expected at least 2 fields (token and label), found 1"),
    ],
)
def test_grobid_malformed(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = _write(tmp_path, "bad.train", text)
    error = _error(read_grobid, path)
    assert error.line == line
    assert str(error).startswith(f"{path}:{line}: ") and fragment in str(error)


def test_grobid_labelled_with_known_feature_count(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.train", GROBID_DATE)
    assert read_grobid(path, n_features=3).n_features == 3
    error = _error(read_grobid, path, n_features=4)
    assert error.line == 1 and "expected 6 fields (token, 4 features, label), found 5" in str(error)


def test_grobid_unlabelled(tmp_path: Path) -> None:
    path = _write(tmp_path, "d.train", GROBID_DATE)
    everything = read_grobid(path, labelled=False)
    assert everything.n_features == 4 and everything.sequences[0].labels is None
    assert everything.sequences[0].features[0] == ["june", "J", "Ju", "I-<month>"]

    with_gold = read_grobid(path, labelled=False, n_features=3)
    assert with_gold.n_features == 3 and with_gold.extra["labelled"] is True
    assert with_gold.sequences[0].features[0] == ["june", "J", "Ju"]
    assert with_gold.sequences[0].labels == ["B-<month>", "B-<day>", "O", "B-<year>"]

    bare = read_grobid(_write(tmp_path, "u.txt", "June june J Ju\n3 3 3 3\n"), False, 3)
    assert bare.sequences[0].labels is None and bare.extra["labelled"] is False
    assert bare.sequences[0].features == [["june", "J", "Ju"], ["3", "3", "3"]]

    error = _error(read_grobid, path, labelled=False, n_features=5)
    assert error.line == 1
    assert "expected 6 fields (token and 5 features) or 7 (with a label), found 5" in str(error)


# ----------------------------------------------------------------------------- text


def test_read_text_keeps_line_alignment(tmp_path: Path) -> None:
    path = _write(tmp_path, "in.txt", "\ufeffHello, world!\r\n\r\n  Bye.\nlast")
    corpus = read_text(path)
    assert corpus.format == "text"
    assert [s.tokens for s in corpus.sequences] == [["Hello", ",", "world", "!"], [],
                                                    ["Bye", "."], ["last"]]
    assert [s.line for s in corpus.sequences] == [1, 2, 3, 4]
    third = corpus.sequences[2]
    assert third.text == "  Bye." and third.offsets == [(2, 5), (5, 6)]
    assert corpus.sequences[1].offsets == [] and corpus.sequences[1].text == ""
    assert len(read_text(_write(tmp_path, "e.txt", ""))) == 0
    assert len(read_text(_write(tmp_path, "n.txt", "\n\n"))) == 2


def test_read_text_sample() -> None:
    corpus = read_text(_real("samples", "test.ner.en.txt"))
    assert len(corpus) == 5
    assert [s.tokens for s in corpus.sequences[2:]] == [["This"], ["is"], ["a"]]
    second = corpus.sequences[1]
    assert second.tokens[-3:] == ["White", "House", "."]
    for sequence in corpus.sequences:
        assert all(sequence.text[b:e] == t for t, (b, e) in zip(sequence.tokens, sequence.offsets))


# ----------------------------------------------------------------------------- detection


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format(_write(tmp_path, "a", CONLL_IOB1)) == "conll"
    assert detect_format(_write(tmp_path, "b", GROBID_DATE)) == "grobid"
    assert detect_format(_write(tmp_path, "c", "x <x>\n")) == "grobid"
    neither = _error(detect_format, _write(tmp_path, "d", "\nx NN\n"))
    assert neither.line == 2 and "neither a CoNLL tag" in str(neither)
    mixed = _error(detect_format, _write(tmp_path, "e", "x O\n\ny I-<x>\n"))
    assert mixed.line == 3 and "line 1 has a conll label" in str(mixed)
    empty = _error(detect_format, _write(tmp_path, "f", "-DOCSTART- -X- O O\n\n"))
    assert empty.line is None and "no token lines" in str(empty)


def test_read_labelled_dispatch(tmp_path: Path) -> None:
    conll = _write(tmp_path, "a", CONLL_IOB1)
    grobid = _write(tmp_path, "b", GROBID_DATE)
    assert read_labelled(conll).format == "conll"
    assert read_labelled(grobid).format == "grobid"
    assert read_labelled(grobid, "grobid").n_features == 3
    assert "expected 2 to 4 columns" in str(_error(read_labelled, grobid, "conll"))
    with pytest.raises(ConfigError, match="'conll', 'grobid'"):
        read_labelled(conll, "json")


# ----------------------------------------------------------------------------- writers


def test_write_conll(tmp_path: Path) -> None:
    corpus = read_conll(_write(tmp_path, "a.conll", CONLL_IOB1))
    predicted = [["O"] * len(s) for s in corpus.sequences]
    out = io.StringIO()
    write_conll(corpus, predicted, out)
    lines = out.getvalue().split("\n")
    assert lines[:6] == ["EU B-ORG O", "rejects O O", "German B-MISC O", "call O O", ". O O", ""]
    assert out.getvalue().endswith("Bonn B-LOC O\n\n")
    reread = read_conll(_write(tmp_path, "out.conll", out.getvalue()))
    assert [s.tokens for s in reread.sequences] == [s.tokens for s in corpus.sequences]

    text = read_text(_write(tmp_path, "t.txt", "Hi Bob\n"))
    out = io.StringIO()
    write_conll(text, [["O", "B-PER"]], out)
    assert out.getvalue() == "Hi O\nBob B-PER\n\n"
    with pytest.raises(ValueError, match="1 predicted tags for 2 tokens"):
        write_conll(text, [["O"]], io.StringIO())
    with pytest.raises(ValueError, match="0 predicted sequences for 1"):
        write_conll(text, [], io.StringIO())


def test_write_grobid_round_trip(tmp_path: Path) -> None:
    corpus = read_grobid(_write(tmp_path, "d.train", GROBID_DATE))
    out = io.StringIO()
    write_grobid(corpus, [s.labels for s in corpus.sequences], out)
    assert out.getvalue() == GROBID_DATE.replace("\n \n", "\n")
    bare = Corpus([corpus.sequences[0].__class__(["a", "b"])], "grobid")
    out = io.StringIO()
    write_grobid(bare, [["B-<x>", "O"]], out)
    assert out.getvalue() == "a I-<x>\nb I-<other>\n\n"


# ----------------------------------------------------------------------------- real data


@pytest.mark.real_data
@pytest.mark.parametrize(
    ("name", "sentences", "tokens", "entities"),
    [
        ("eng.train", 14041, 203621, {"PER": 6600, "ORG": 6321, "LOC": 7140, "MISC": 3438}),
        ("eng.testa", 3250, 51362, {"PER": 1842, "ORG": 1341, "LOC": 1837, "MISC": 922}),
        ("eng.testb", 3453, 46435, {"PER": 1617, "ORG": 1661, "LOC": 1668, "MISC": 702}),
    ],
)
def test_real_conll2003(name: str, sentences: int, tokens: int, entities: dict[str, int]) -> None:
    path = _real("conll2003", name)
    corpus = read_conll(path)
    assert len(corpus) == sentences
    assert sum(len(s) for s in corpus.sequences) == tokens
    begins = collections.Counter(t[2:] for s in corpus.sequences for t in s.labels if t[0] == "B")
    assert begins == entities
    assert corpus.extra["columns"] == 4 and corpus.extra["scheme"] == "iob1"
    assert detect_format(path) == "conll"
    if name == "eng.train":
        assert len(corpus.extra["doc_starts"]) == 946


# (folder, file, sequences, tokens, features, tokens whose I-<other> comes back as <other>)
GROBID_FILES = [
    ("date", "date-220311.train", 637, 2510, 16, 1),
    ("name-citation", "name-citation-251225.train", 448, 5888, 19, 0),
    ("name-header", "name-header-251225.train", 1450, 25694, 19, 34),
    ("affiliation-address", "affiliation-address-251225.train", 1238, 41437, 20, 6),
]


@pytest.mark.real_data
@pytest.mark.parametrize(("folder", "name", "sequences", "tokens", "features", "lost"),
                         GROBID_FILES)
def test_real_grobid(folder: str, name: str, sequences: int, tokens: int, features: int,
                     lost: int) -> None:
    path = _real("grobid", folder, name)
    corpus = read_grobid(path)
    assert (len(corpus), sum(len(s) for s in corpus.sequences)) == (sequences, tokens)
    assert corpus.n_features == features
    assert all(len(f) == features for s in corpus.sequences for f in s.features)
    assert detect_format(path) == "grobid"
    if folder == "date":
        labels = {t for s in corpus.sequences for t in s.labels}
        assert labels == {"B-<day>", "I-<day>", "B-<month>", "B-<year>", "I-<year>", "O"}
    # GROBID -> IOB2 -> GROBID is the identity except where the file opens a new I-<other> run
    # right after another <other> token: IOB2 has one O, so that boundary cannot survive.
    raw = [line.split(" ")[-1] for line in path.read_text("utf-8").split("\n") if line.strip()]
    back = [label for s in corpus.sequences for label in iob2_to_grobid(s.labels)]
    differences = collections.Counter((a, b) for a, b in zip(raw, back) if a != b)
    assert len(raw) == len(back) == tokens
    assert differences == ({("I-<other>", "<other>"): lost} if lost else {})
    # writing the gold labels back gives the file again, up to those tokens and the separators
    out = io.StringIO()
    write_grobid(corpus, [s.labels for s in corpus.sequences], out)
    written = [line for line in out.getvalue().split("\n") if line]
    original = [line for line in path.read_text("utf-8").split("\n") if line.strip()]
    assert sum(a != b for a, b in zip(written, original)) == lost


def test_grobid_lines_of_other_whitespace_end_a_sequence_and_stray_spaces_separate_nothing(tmp_path: Path) -> None:
    """A line of whitespace other than spaces and tabs (an ideographic space) is a boundary, and
    leading, trailing or doubled spaces around fields make no empty field, read whole or streamed."""
    text = "a f I-<x>\n b  f <x> \n\u3000\nc\u3000d f\tI-<y>\n\u2003 \t\nd f I-<y>\n"
    path = _write(tmp_path, "w.train", text)
    for sequences in (read_grobid(path).sequences, list(stream_grobid(path))):
        assert [s.tokens for s in sequences] == [["a", "b"], ["c\u3000d"], ["d"]]
        assert [s.features for s in sequences] == [[["f"], ["f"]], [["f"]], [["f"]]]
        assert [s.line for s in sequences] == [1, 4, 6]


@pytest.mark.parametrize("kept", [1, 2, 3, 1000])
def test_grobid_lines_split_once_read_as_lines_split_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 kept: int) -> None:
    """However few split lines the parser keeps (it drops them when full, or stops keeping them
    when lines do not repeat), the sequences and the error on a repeated line are the same."""
    from textorch.data import sequence_parsers
    from textorch.data.tags import grobid_to_iob2

    monkeypatch.setattr(sequence_parsers, "SPLIT_LINES_KEPT", kept)
    lines = [f"t{i % 3} f{i % 2} {'I-<a>' if i % 4 else '<a>'}" for i in range(40)]
    text = "\n".join(lines[:10]) + "\n\n" + "\n".join(f"u{i} g {lines[i]}" for i in range(7)) + "\n\n" + "\n".join(lines[10:])
    path = _write(tmp_path, "r.train", text + "\n")
    sequences = read_grobid(path).sequences
    assert [len(s) for s in sequences] == [10, 7, 30]
    assert sequences[2].tokens == [line.split()[0] for line in lines[10:]]
    assert sequences[1].features == [["g", *lines[i].split()[:2]] for i in range(7)]
    assert sequences[2].labels == grobid_to_iob2([line.split()[-1] for line in lines[10:]])
    bad = "\n".join(lines[:5]) + "\n\n" + "u g t0 f0 I-<a>\n" + lines[1] + "\n"
    with pytest.raises(DataError, match=r"r2.train:8: expected 5 fields \(as on line 7\), found 3"):
        list(stream_grobid(_write(tmp_path, "r2.train", bad)))


@pytest.mark.parametrize("kept", [2, 1 << 20])
def test_grobid_field_values_read_on_different_lines_are_one_string(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     kept: int) -> None:
    """A feature matrix repeats a few values over millions of fields: equal values of different
    lines are one object (a corpus of whole documents held in about half the memory), however
    few values the parser keeps shared; the sequences read are the same."""
    from textorch.data import sequence_parsers

    monkeypatch.setattr(sequence_parsers, "SHARED_VALUES_KEPT", kept)
    monkeypatch.setattr(sequence_parsers, "SPLIT_LINES_KEPT", 1)  # every line split on its own
    text = "Alpha alpha LINESTART I-<a>\nBeta beta LINEIN <a>\n\nGamma gamma LINESTART I-<b>\nalpha alpha LINEEND <b>\n"
    path = _write(tmp_path, "s.train", text)
    for sequences in (read_grobid(path).sequences, list(stream_grobid(path))):
        assert [s.features for s in sequences] == [[["alpha", "LINESTART"], ["beta", "LINEIN"]],
                                                   [["gamma", "LINESTART"], ["alpha", "LINEEND"]]]
        assert sequences[1].tokens == ["Gamma", "alpha"]
        if kept > 2:
            assert sequences[0].features[0][1] is sequences[1].features[0][1]  # LINESTART, lines 1 and 4
            assert sequences[0].features[0][0] is sequences[1].features[1][0] is sequences[1].tokens[1]
