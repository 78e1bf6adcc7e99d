"""GROBID input tagged as rows (the ONNX Runtime tagger's fast path): the same chunks as the
sequence reader, the same columns as ``read_columns``, the same text as ``grobid_block``, and a
``seq tag --engine onnx`` output byte for byte the sequence route's, fallbacks and errors included."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the row path serves the ONNX Runtime tagger (pip install 'textorch[onnx]')")

from conftest import write_tiny_grobid  # noqa: E402
from textorch.cli.main import main  # noqa: E402
from textorch.data.columns import read_columns  # noqa: E402
from textorch.data.readers import read_grobid, read_labelled  # noqa: E402
from textorch.data.row_chunks import RowLayout, chunk_columns, chunk_sequences, row_chunks  # noqa: E402
from textorch.data.streams import chunks, stream_grobid  # noqa: E402
from textorch.data.writers import grobid_block, grobid_rows_text  # noqa: E402
from textorch.errors import DataError  # noqa: E402
from textorch.tagging.onnx_tagger import OnnxTagger  # noqa: E402
from textorch.tagging.row_tagging import RowTaggingRun  # noqa: E402
from textorch.data.streams import ChunkSize  # noqa: E402

SMALL = ["--chunk-sequences", "3", "--chunk-tokens", "1000000"]


def _random_grobid(rng: random.Random, n_sequences: int, width: int = 3, separators: tuple[str, ...] = ("", " ", "\t ")) -> str:
    """Sequences of 1-6 rows of ``width`` fields, closed by blank or whitespace lines (sometimes
    several), the last one sometimes without a newline."""
    parts: list[str] = []
    for s in range(n_sequences):
        parts += [" ".join([f"w{s}.{t}", *(f"f{(s + t + c) % 3}" for c in range(width - 1))]) for t in range(rng.randint(1, 6))]
        parts += [rng.choice(separators) for _ in range(rng.choice((1, 1, 2)))]
    if parts and rng.random() < 0.5:
        while parts and not parts[-1].strip():
            parts.pop()
    return "\n".join(parts) + rng.choice(("", "\n"))


@pytest.mark.parametrize("seed", range(40))
def test_row_chunks_are_the_chunks_of_the_sequence_reader(tmp_path: Path, seed: int) -> None:
    """Blocks of a few bytes cut sequences and lines anywhere; chunks close on sequences or tokens."""
    rng = random.Random(seed)
    path = tmp_path / "in.grobid"
    path.write_text(_random_grobid(rng, rng.choice((0, 1, 2, 3, 9, 25))), encoding="utf-8")
    max_sequences, max_tokens = rng.choice((2, 3, 5)), rng.choice((1, 4, 10, 10**6))
    expected = list(chunks(stream_grobid(path, labelled=False, n_features=2), max_sequences, max_tokens))
    got = list(row_chunks(path, max_sequences, max_tokens, block_bytes=rng.choice((7, 16, 64, 1 << 20))))
    assert [part.lengths.tolist() for part in got] == [[len(s) for s in part] for part in expected]
    for part, sequences in zip(got, expected):
        assert chunk_sequences(path, part, None, 2, []) == sequences  # lines, numbers and cuts
        assert part.n_tokens == len(part.numbers) == sum(map(len, sequences))


def test_a_bad_byte_ends_the_rows_after_the_sequences_before_it(tmp_path: Path) -> None:
    path = tmp_path / "in.grobid"
    good = "".join(f"a{i} x y\nb{i} x y\n\n" for i in range(10))
    path.write_bytes(good.encode() + b"c x y\nd \xff y\n\n")
    got: list = []
    with pytest.raises(DataError) as streamed:
        for part in row_chunks(path, 3, 10**6, block_bytes=16):
            got.append(part)
    with pytest.raises(DataError) as by_line:
        list(stream_grobid(path, labelled=False, n_features=2))
    assert str(streamed.value) == str(by_line.value) and ":32:" in str(streamed.value)
    assert sum(len(part) for part in got) == 10 and [len(part) for part in got] == [3, 3, 4]


@pytest.mark.parametrize("repeats", [1, 3])
def test_chunk_columns_are_read_columns_of_the_parsed_sequences(tmp_path: Path, repeats: int) -> None:
    path = write_tiny_grobid(tmp_path / "train.grobid", 30)  # token, 4 features, gold label
    path.write_text(path.read_text() * repeats)
    rows = next(row_chunks(path, 10**6, 10**6))
    layout = RowLayout.of_first_line(path, rows, 4)
    assert (layout.width, layout.has_label, layout.n_features, layout.line) == (6, True, 4, 1)
    sequences = chunk_sequences(path, rows, layout, 4, [])
    columns = [-1, 0, 2, 3, 7]  # the token, features, and one the rows lack
    got = chunk_columns(rows, layout, columns)
    assert got is not None
    assert (got.values.inverse is not None) == (repeats > 1)  # lines that repeat: values kept per distinct line
    expected = read_columns(sequences, columns)
    assert got.tokens == [token for s in sequences for token in s.tokens]
    for column in columns:
        assert got.values[column] == expected[column]
        index = {"june": 5, "LINEEND": 7}
        np.testing.assert_array_equal(got.values.ids(column, index, 1), expected.ids(column, index, 1))


@pytest.mark.parametrize("line, why", [("June\tjune a b c I-<month>", "a tab"), ("June  june a b c I-<month>", "a doubled space"),
                                       ("June june a b I-<month>", "another width"), (" June june a b c I-<month>", "a leading space"),
                                       ("June june a b c I-<month>", "-"), ("June june a b c BAD", "a bad gold label")])
def test_a_chunk_that_is_not_plain_rows_is_left_to_the_parser(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / "in.grobid"
    path.write_text(f"May may a b c I-<month>\n{line}\n\n", encoding="utf-8")
    layout = RowLayout(width=6, line=1, has_label=True, n_features=4)
    got = chunk_columns(next(row_chunks(path, 10, 10)), layout, [0])
    assert (got is None) == (why != "-"), why


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("gold", [False, True])
def test_rows_text_is_grobid_block_text(seed: int, gold: bool) -> None:
    rng = random.Random(seed)
    tags = ["O", "B-<date>", "I-<date>", "B-<year>", "I-<year>"]
    lengths = np.array([rng.randint(1, 5) for _ in range(30)], dtype=np.int64)
    tag_ids = np.array([rng.randrange(len(tags)) for _ in range(int(lengths.sum()))], dtype=np.int64)
    fields = [[f"t{i}", f"f{i % 3}", "LINEIN"] for i in range(len(tag_ids))]
    lines = [" ".join(row + (["I-<gold>"] if gold else [])) for row in fields]
    expected, start = [], 0
    from textorch.data.corpus import TokenSequence

    for n in lengths.tolist():
        sequence = TokenSequence([r[0] for r in fields[start:start + n]], features=[r[1:] for r in fields[start:start + n]])
        expected.append(grobid_block(sequence, [tags[k] for k in tag_ids[start:start + n].tolist()]))
        start += n
    assert grobid_rows_text(lines, lengths, tag_ids, tags, drop_last_field=gold) == "".join(expected)


# ------------------------------------------------------------------------------ tagging
def _trained(root: Path, architecture: str) -> Path:
    """A briefly trained GROBID tagger of ``architecture``, exported into ``MODEL/onnx``."""
    from corpus_vectors import write_corpus_vectors
    from textorch.embeddings import open_embeddings
    from textorch.onnx.engine import attach_onnx
    from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
    from textorch.tagging.labeler import SequenceLabeler

    corpus = read_labelled(write_tiny_grobid(root / "train.grobid", 40))
    vectors = write_corpus_vectors(root / "vectors.txt", corpus)
    labeler = SequenceLabeler.build(
        corpus, ModelConfig(architecture=architecture, char_dim=8, char_hidden=8, word_hidden=12,
                            feature_dim=3, feature_output_dim=8, dropout=0.1),
        DataConfig(), embeddings=open_embeddings(str(vectors), cache_dir=root / "cache"), seed=1)
    labeler.fit(corpus, None, TrainConfig(max_epoch=2, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    labeler.save(root / "model")
    attach_onnx(labeler, root / "model")
    return root / "model"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A features + CRF-template tagger (the GROBID default's kind)."""
    return _trained(tmp_path_factory.mktemp("rows"), "BidLSTM_CRF_FEATURES_TEMPLATE")


def _input(path: Path, n: int, gold: bool = False, huge: int = 0, odd: bool = False, bad_last: bool = False) -> Path:
    """``n`` date sequences of the tiny corpus as rows (with the gold column when ``gold``), a
    ``huge`` one in the middle, ``odd``: one sequence's fields separated by tabs and doubled spaces."""
    source = write_tiny_grobid(path.with_suffix(".src"), n=max(n, 1))
    blocks = [block.strip() for block in source.read_text().split("\n\n \n") if block.strip()][:n]
    if not gold:
        blocks = ["\n".join(line.rsplit(" ", 1)[0] for line in block.splitlines()) for block in blocks]
    if huge:
        row = "12 12 LINEIN NOCAPS NOPUNCT" + (" I-<day>" if gold else "")
        blocks.insert(len(blocks) // 2, "\n".join([row] * huge))
    if odd and blocks:
        blocks[len(blocks) // 3] = blocks[len(blocks) // 3].replace(" ", "\t", 1).replace(" ", "  ", 1)
    if bad_last:
        blocks.append("June june LINESTART INITCAP NOPUNCT\n12 12\n2005 2005 LINEEND NOCAPS NOPUNCT")
    path.write_text("".join(block + "\n\n" for block in blocks), encoding="utf-8")
    return path


def _sequence_route(model: Path, path: Path) -> str:
    """What the ONNX Runtime tagger answers on the parsed sequences, written by ``grobid_block``."""
    tagger = OnnxTagger.open(model, threads=1)
    sequences = read_grobid(path, labelled=False, n_features=tagger.n_features).sequences
    predictions = tagger.predict(sequences, batch_size=32, with_scores=False)
    return "".join(grobid_block(s, p.labels) for s, p in zip(sequences, predictions))


@pytest.mark.parametrize("n, gold, huge, odd", [(0, False, 0, False), (1, False, 0, False), (3, False, 0, False),
                                                (4, True, 0, False), (7, False, 120, False), (8, True, 0, True),
                                                (20, False, 0, True)])
def test_seq_tag_on_rows_equals_the_sequence_route(model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   n: int, gold: bool, huge: int, odd: bool) -> None:
    """Chunks of 3: empty input, one sequence, a full chunk, a lone last sequence joining the
    chunk before, a huge sequence, a gold label column (not written back), a chunk whose
    odd spacing sends it through the parser; byte for byte."""
    import textorch.tagging.row_tagging as row_tagging

    written: list[int] = []
    original = row_tagging.grobid_rows_text
    monkeypatch.setattr(row_tagging, "grobid_rows_text", lambda *a, **k: written.append(1) or original(*a, **k))
    path = _input(tmp_path / "in.grobid", n, gold=gold, huge=huge, odd=odd)
    out = tmp_path / "out.grobid"
    assert main(["seq", "tag", "--model", str(model), "--input", str(path), "--input-format", "grobid",
                 "--output", str(out), "--engine", "onnx", "--threads", "1", *SMALL]) == 0
    assert out.read_text(encoding="utf-8") == _sequence_route(model, path)
    assert (len(written) > 0) == (n > 0)  # the row path ran (the odd chunk aside)


def test_a_tagger_that_reads_no_feature_column_tags_rows_too(tmp_path_factory: pytest.TempPathFactory,
                                                             tmp_path: Path) -> None:
    """BidLSTM_CRF on GROBID data: the rows' features are read past and written back."""
    plain = _trained(tmp_path_factory.mktemp("plain"), "BidLSTM_CRF")
    for gold in (False, True):
        path = _input(tmp_path / f"in-{gold}.grobid", 9, gold=gold, huge=30, odd=True)
        out = tmp_path / f"out-{gold}.grobid"
        assert main(["seq", "tag", "--model", str(plain), "--input", str(path), "--input-format", "grobid",
                     "--output", str(out), "--engine", "onnx", *SMALL]) == 0
        assert out.read_text(encoding="utf-8") == _sequence_route(plain, path)


def test_gzipped_rows_and_stats_count_every_sequence(model: Path, tmp_path: Path) -> None:
    plain = _input(tmp_path / "in.grobid", 11, huge=40, odd=True)
    packed = tmp_path / "in.grobid.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    tagger = OnnxTagger.open(model, threads=1)
    run = RowTaggingRun(tagger, str(packed), tagger.n_features, 32, ChunkSize(3, 10**6))
    texts = list(run)
    assert "".join(text for text, _ in texts) == _sequence_route(model, plain)
    assert run.n_sequences == sum(n for _, n in texts) == 12 and run.n_tokens == sum(map(len, read_grobid(plain, False, 4).sequences))
    assert 0 < run.fast_chunks < len(texts)  # the odd chunk went through the parser, the others not


def test_an_error_on_the_last_sequence_keeps_the_rows_before_it_as_partial(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    good = _input(tmp_path / "good.grobid", 40)
    bad = _input(tmp_path / "bad.grobid", 40, bad_last=True)
    bad_line = bad.read_text().splitlines().index("12 12") + 1
    out = tmp_path / "out" / "tagged"
    assert main(["seq", "tag", "--model", str(model), "--input", str(bad), "--input-format", "grobid",
                 "--output", str(out), "--engine", "onnx", *SMALL]) == 2
    error = capsys.readouterr().err
    partial = out.with_name("tagged.partial")
    assert f"{bad}:{bad_line}: expected 5 fields (as on line 1), found 2" in error and "the 40 " in error, error
    assert not out.exists() and partial.read_text(encoding="utf-8") == _sequence_route(model, good)


def test_a_first_line_that_does_not_fit_the_model_is_reported_at_its_line(model: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.grobid"
    bad.write_text("June june\n", encoding="utf-8")
    out = tmp_path / "out.grobid"
    assert main(["seq", "tag", "--model", str(model), "--input", str(bad), "--input-format", "grobid",
                 "--output", str(out), "--engine", "onnx"]) == 2
    assert f"{bad}:1: expected 5 fields" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("fault", ["a bad byte", "a bad gold label"])
def test_a_fault_far_into_the_file_is_named_and_the_rows_before_it_are_kept(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture, fault: str,
) -> None:
    good = _input(tmp_path / "good.grobid", 40, gold=True)
    text = good.read_text(encoding="utf-8")
    bad_line = text.count("\n") + 2
    bad = tmp_path / "bad.grobid"
    tail = (b"12 \xff LINEEND NOCAPS NOPUNCT I-<day>" if fault == "a bad byte" else b"12 12 LINEEND NOCAPS NOPUNCT BAD")
    bad.write_bytes(text.encode() + b"June june LINESTART INITCAP NOPUNCT I-<month>\n" + tail + b"\n\n")
    out = tmp_path / "out" / "tagged"
    assert main(["seq", "tag", "--model", str(model), "--input", str(bad), "--input-format", "grobid",
                 "--output", str(out), "--engine", "onnx", *SMALL]) == 2
    error = capsys.readouterr().err
    expected = "invalid UTF-8" if fault == "a bad byte" else "invalid GROBID label 'BAD'"
    assert f"{bad}:{bad_line}: {expected}" in error and "the 40 " in error, error
    assert not out.exists() and out.with_name("tagged.partial").read_text(encoding="utf-8") == _sequence_route(model, good)
