"""Tagging a GROBID file as rows: the ONNX Runtime tagger's fast path from GROBID input to GROBID output.

Why: with four-token sequences (GROBID's date model), building a sequence object per sequence and
a field list per token, then a line per token back, cost more than the network
(docs/performance.md). :class:`RowTaggingRun` reads the file as chunks of lines
(:func:`textorch.data.row_chunks.row_chunks`), encodes each chunk from its columns
(:meth:`OnnxTagger.tag_columns`) and writes each line back with its label appended
(:func:`textorch.data.writers.grobid_rows_text`). The chunks, batches and labels are those of
:class:`textorch.tagging.tag_files.TaggingRun` on the same file, so the output is the same bytes;
a chunk that is not plain rows goes through the sequence parser and ``predict``, which also
report any line at fault as before.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from textorch.data.corpus import TokenSequence
from textorch.data.streams import ChunkSize
from textorch.data.row_chunks import RowChunk, RowLayout, chunk_columns, chunk_sequences, row_chunks
from textorch.data.writers import grobid_block, grobid_rows_text
from textorch.errors import DataError, TextorchError
from textorch.runtime.progress import RunTally, TaggingProgress

if TYPE_CHECKING:
    from textorch.tagging.onnx_tagger import OnnxTagger


class RowTaggingRun(RunTally):
    """Iterate for each chunk's output text (GROBID layout) and sequence count, in input order.

    As :class:`~textorch.tagging.tag_files.TaggingRun`, a data error in the input ends the run
    once the sequences read before it are tagged (their text handed out first)."""

    def __init__(self, tagger: OnnxTagger, path: str, n_features: int | None, batch_size: int,
                 chunk: ChunkSize = ChunkSize(), progress: TaggingProgress | None = None) -> None:
        super().__init__(progress)
        self.tagger = tagger
        self.path = path
        self.n_features = n_features
        self.batch_size = batch_size
        self.chunk = chunk
        self.layout: RowLayout | None = None
        self.fast_chunks = 0
        """Chunks tagged from their columns (the others went through the sequence parser)."""

    def __iter__(self) -> Iterator[tuple[str, int]]:
        columns_read = self.tagger.encoder.columns_read
        tags = self.tagger.encoder.labels.items
        for rows in row_chunks(self.path, self.chunk.sequences, self.chunk.tokens):
            if self.layout is None:
                try:
                    self.layout = RowLayout.of_first_line(self.path, rows, self.n_features)
                except DataError:
                    pass  # the parser below reports it, at the same line
            columns = chunk_columns(rows, self.layout, columns_read) if self.layout is not None else None
            if columns is None:
                yield from self._parsed(rows)
                continue
            started = time.perf_counter()
            tag_ids, _ = self.tagger.tag_columns(columns, self.batch_size)
            self.tally(len(rows), rows.n_tokens, time.perf_counter() - started)
            self.fast_chunks += 1
            yield grobid_rows_text(rows.lines, rows.lengths, tag_ids, tags, self.layout.has_label), len(rows)  # type: ignore[union-attr]

    def _parsed(self, rows: RowChunk) -> Iterator[tuple[str, int]]:
        """A chunk read by the sequence parser: its sequences up to a line at fault, tagged by
        ``predict`` and written as :func:`grobid_block` writes them; then that line's error."""
        read: list[TokenSequence] = []
        failure: TextorchError | None = None
        try:
            chunk_sequences(self.path, rows, self.layout, self.n_features, read)
        except TextorchError as exc:
            failure = exc
        if read:
            started = time.perf_counter()
            predictions = self.tagger.predict(read, batch_size=self.batch_size, with_scores=False)
            self.tally(len(read), sum(map(len, read)), time.perf_counter() - started)
            yield "".join([grobid_block(sequence, prediction.labels) for sequence, prediction in zip(read, predictions)]), len(read)
        if failure is not None:
            raise failure
