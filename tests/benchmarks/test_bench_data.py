"""The suite's data (benchmarks/peers/bench_data.py): both systems get the same files, converted
where one reads another format, split the same way per seed, read line by line as Wapiti reads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import write_tiny_grobid

from benchmarks.peers import bench_data
from benchmarks.peers import wapiti_peer
from benchmarks.peers.runner_common import read_blocks


def test_iob1_to_iob2_opens_entities_with_b():
    tags = ["I-ORG", "I-ORG", "O", "I-PER", "B-PER", "I-LOC", "I-MISC"]
    assert bench_data.iob1_to_iob2(tags) == ["B-ORG", "I-ORG", "O", "B-PER", "B-PER", "B-LOC", "B-MISC"]


def test_convert_conll_writes_delft_two_column_iob2(tmp_path):
    source = tmp_path / "eng.train"
    source.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\n")
    target = tmp_path / "out" / "eng.train"
    bench_data.convert_conll(source, target)
    assert target.read_text() == "-DOCSTART-\tO\n\nEU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n"


def test_grobid_splits_are_disjoint_and_complete(tmp_path, monkeypatch):
    data = tmp_path / "shared"
    (data / "grobid" / "date").mkdir(parents=True)
    write_tiny_grobid(data / "grobid" / "date" / "date-220311.train", n=40)
    monkeypatch.setenv("TEXTORCH_SHARED_DATA", str(data))
    files = bench_data.prepare(tmp_path / "work", ["date"], [1, 2])
    original = read_blocks(data / "grobid" / "date" / "date-220311.train")
    for seed in (1, 2):
        parts = {role: read_blocks(Path(path)) for role, path in files[(("date", seed))].delft.items()}
        assert files[("date", seed)].textorch == files[("date", seed)].delft  # the very same files
        assert [len(parts[r]) for r in ("train", "valid", "test")] == [32, 4, 4]
        joined = sorted(map(tuple, parts["train"] + parts["valid"] + parts["test"]))
        assert joined == sorted(map(tuple, original))
    first = read_blocks(Path(files[("date", 1)].delft["test"]))
    second = read_blocks(Path(files[("date", 2)].delft["test"]))
    assert first != second  # the seed changes the split


def test_read_blocks_cuts_lines_at_newlines_only_as_wapiti_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "mixed.train"
    path.write_bytes("a\x0cb F I-<x>\r\nc F <x>\r\n \r\nd F I-<y>\n\n\ne F I-<y>".encode("utf-8"))
    assert read_blocks(path) == [["a\x0cb F I-<x>", "c F <x>"], ["d F I-<y>"], ["e F I-<y>"]]


def test_an_own_corpus_is_split_as_the_tasks_are_under_its_own_name(tmp_path, monkeypatch):
    """``--corpus NAME=TRAIN,TEMPLATE``: a file no task names, split per seed exactly as a shared
    task's file would be, with its template carried to Wapiti (``wapiti_peer.train_args``)."""
    data = tmp_path / "shared"
    (data / "grobid" / "date").mkdir(parents=True)
    shared = write_tiny_grobid(data / "grobid" / "date" / "date-220311.train", n=40)
    monkeypatch.setenv("TEXTORCH_SHARED_DATA", str(data))
    own = tmp_path / "mine" / "layout.train"
    own.parent.mkdir()
    own.write_bytes(shared.read_bytes())
    template = own.with_suffix(".crf-template")
    template.write_text("U00:%x[0,0]\n", encoding="utf-8")
    corpus = bench_data.parse_corpus(f"layoutish={own},{template}", {"date", "figure"})
    assert (corpus.name, corpus.train, corpus.template) == ("layoutish", own.resolve(), template.resolve())
    assert bench_data.OwnCorpus.from_json("layoutish", corpus.to_json()) == corpus
    files = bench_data.prepare(tmp_path / "work", ["date", "layoutish"], [1, 2], {"layoutish": corpus})
    for seed in (1, 2):
        mine, theirs = files[("layoutish", seed)], files[("date", seed)]
        assert "/layoutish/" in mine.textorch["test"] and mine.template == str(template.resolve())
        assert theirs.template is None
        for role in ("train", "valid", "test"):  # the same content gives the same split
            assert Path(mine.textorch[role]).read_text() == Path(theirs.textorch[role]).read_text()
    args = wapiti_peer.train_args(tmp_path, "wapiti", "layoutish", 1, files[("layoutish", 1)], tmp_path / "p.json")
    assert args[args.index("--template") + 1] == str(template.resolve())


@pytest.mark.parametrize("text,message", [("date=FILE", "is taken"), ("x", "expected NAME=TRAINFILE"),
                                          ("../x=FILE", "expected NAME=TRAINFILE"), ("x=absent.train", "not found"),
                                          ("x=FILE,absent.crf-template", "not found")])
def test_an_own_corpus_needs_a_free_name_and_files_that_exist(tmp_path, text, message):
    train = tmp_path / "x.train"
    train.write_text("a I-<x>\n\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=message):
        bench_data.parse_corpus(text.replace("FILE", str(train)).replace("absent", str(tmp_path / "absent")),
                                {"date"})
