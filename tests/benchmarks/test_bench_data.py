"""The suite's data (benchmarks/peers/bench_data.py): both systems get the same files, converted
where one reads another format, split the same way per seed, read line by line as Wapiti reads them.
"""

from __future__ import annotations

from pathlib import Path

from conftest import write_tiny_grobid

from benchmarks.peers import bench_data
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
