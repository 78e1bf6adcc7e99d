"""The streaming benchmark's generated input: the size it says, in whole sequences, readable."""

from __future__ import annotations

from pathlib import Path

from conftest import write_tiny_grobid
from textorch.data.readers import read_grobid

from benchmarks.features import bench_streaming


def test_generated_input_holds_the_tokens_it_reports_in_whole_sequences(tmp_path: Path) -> None:
    source = write_tiny_grobid(tmp_path / "src.train", n=7)
    blocks = [block + "\n\n" for block in source.read_text().split("\n\n \n") if block.strip()]
    target = tmp_path / "input.grobid"
    written = bench_streaming.write_input(target, blocks, 50)
    corpus = read_grobid(target, labelled=True)
    assert written == sum(len(s) for s in corpus.sequences) == len([l for l in target.read_text().splitlines() if l.strip()])
    assert 50 <= written < 50 + max(len(s) for s in corpus.sequences)
    assert len(corpus.sequences) > 7  # the blocks were repeated
