"""Tagging files with a saved tagger: read the input (text, CoNLL or GROBID), tag it, time it.

``seq tag`` and ``grobid ... tag`` go through these; the answer itself is the ``predict`` of the
tagger the commands were given (:mod:`textorch.onnx.opening` chose it: a
:class:`~textorch.tagging.labeler.SequenceLabeler`, or the torch-free
:class:`~textorch.tagging.onnx_tagger.OnnxTagger` with the same contract). The commands stream
(:func:`stream_for_tagging`, :class:`TaggingRun`, :class:`TaggedWriter`): the input is read in
chunks of sequences (:class:`textorch.data.streams.ChunkSize`, the chunk rule classification
shares), each chunk tagged and written before the next is read, so memory does not grow with
the file. :func:`read_for_tagging` reads a whole file, for the API.
"""

from __future__ import annotations

import gzip
import logging
import time
import zlib
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.json_stream import JsonListWriter
from textorch.data.readers import read_conll, read_grobid, read_text
from textorch.data.staged_output import StagedOutput
from textorch.data.streams import ChunkSize, check_input_file, stream_conll, stream_grobid, stream_text, until_error
from textorch.data.tags import is_grobid_label
from textorch.data.writers import answer_header, conll_block, grobid_block
from textorch.errors import ConfigError, TextorchError
from textorch.eval.metrics import EntityCounts
from textorch.tagging.answer import text_record
from textorch.tagging.prediction import Prediction
from textorch.runtime.progress import RunTally, TaggingProgress
from textorch.train.dist import DistContext

if TYPE_CHECKING:  # a tagger is handed in: ONNX Runtime's own tagger runs here without torch
    from textorch.tagging.labeler import SequenceLabeler

INPUT_FORMATS = ("text", "conll", "grobid")

logger = logging.getLogger(__name__)


def _check_format(input_format: str) -> None:
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"unknown --input-format {input_format!r}; choose one of: {', '.join(INPUT_FORMATS)}")


def stream_for_tagging(path: str, input_format: str, labeler: SequenceLabeler) -> Iterator[TokenSequence]:
    """The sequences :func:`read_for_tagging` reads, one at a time, as the file is read."""
    _check_format(input_format)
    check_input_file(path)  # before any look at its first lines: /dev/zero or a FIFO is never opened
    if input_format == "text":
        _warn_if_feature_rows(path, labeler)
        return stream_text(path)
    if input_format == "grobid":
        return stream_grobid(path, labelled=False, n_features=grobid_width(path, labeler))
    return stream_conll(path, labelled=False)


class TaggingRun(RunTally):
    """Tag a stream of sequences chunk by chunk: iterate for ``(chunk, predictions)`` pairs.

    With several processes each one iterates the same chunks (every process reads the file)
    and tags its share of each (whole batches, dealt round-robin by ``predict``); every process
    receives each chunk's predictions in input order. A data error in the input ends the run
    once the sequences read before it are tagged, so that they can be written.
    """

    def __init__(self, labeler: SequenceLabeler, sequences: Iterable[TokenSequence], batch_size: int,
                 ctx: DistContext | None = None, with_scores: bool = True, chunk: ChunkSize = ChunkSize(),
                 progress: TaggingProgress | None = None) -> None:
        super().__init__(progress)
        self.labeler = labeler
        self.sequences = sequences
        self.batch_size = batch_size
        self.ctx = ctx
        self.with_scores = with_scores
        self.chunk = chunk

    def __iter__(self) -> Iterator[tuple[list[TokenSequence], list[Prediction]]]:
        failure: list[TextorchError] = []
        for chunk in self.chunk.cut(until_error(self.sequences, failure)):
            started = time.perf_counter()
            predictions = self.labeler.predict(chunk, batch_size=self.batch_size, ctx=self.ctx, with_scores=self.with_scores)
            self.tally(len(chunk), sum(len(s) for s in chunk), time.perf_counter() - started)
            yield chunk, predictions
        if failure:
            raise failure[0]


class TaggedWriter:
    """A tagging run's output in the input's style, sequence by sequence, to a :class:`StagedOutput`.

    ``text`` input gives DeLFT's JSON answer (``labels_as``: also each text's per-token labels,
    as ``grobid MODEL tag`` writes them); ``conll`` and ``grobid`` input the same layout back
    with the predicted label, as :func:`textorch.data.writers.write_conll` / ``write_grobid``.
    """

    def __init__(self, staged: StagedOutput, output_format: str, model_name: str, labels_as: str | None = None) -> None:
        self.staged = staged
        self.output_format = output_format
        self.labels_as = labels_as
        self.json: JsonListWriter | None = None
        if output_format == "json":
            header = answer_header(model_name, 0.0)
            header_first = header if staged.target is None else None
            self.json = JsonListWriter(staged.out, "texts", header_first)
            self.json.header = header
            staged.head, staged.tail = self.json.head, self.json.tail
            staged.unit = "texts"

    def add(self, sequences: list[TokenSequence], predictions: list[Prediction]) -> None:
        if len(predictions) != len(sequences):
            raise ValueError(f"{len(predictions)} predictions for {len(sequences)} sequences")
        if self.json is not None:
            for sequence, prediction in zip(sequences, predictions):
                self.json.add(text_record(sequence, prediction, self.labels_as))
                self.staged.wrote(1)  # each as written: a Ctrl-C or SIGTERM between two records counts right
            return
        block = grobid_block if self.output_format == "grobid" else conll_block
        parts = []
        for sequence, prediction in zip(sequences, predictions):
            if len(prediction.labels) != len(sequence.tokens):
                raise ValueError(f"{len(prediction.labels)} predicted tags for {len(sequence.tokens)} tokens")
            parts.append(block(sequence, prediction.labels))
        self.staged.out.write("".join(parts))  # one write: the chunk's sequences are in the file whole or not at all
        self.staged.wrote(len(sequences))

    def set_runtime(self, runtime_s: float) -> None:
        """The JSON answer's ``runtime``, written with its header at the end."""
        if self.json is not None:
            self.json.header["runtime"] = round(runtime_s, 3)


def read_for_tagging(path: str, input_format: str, labeler: SequenceLabeler) -> Corpus:
    """Read input to tag; a gold label column in CoNLL/GROBID input is recognised and ignored."""
    _check_format(input_format)
    check_input_file(path)
    if input_format == "text":
        _warn_if_feature_rows(path, labeler)
        return read_text(path)
    if input_format == "grobid":
        return read_grobid(path, labelled=False, n_features=grobid_width(path, labeler))
    return read_conll(path, labelled=False)


def grobid_width(path: str, labeler: SequenceLabeler) -> int:
    """The feature columns of GROBID input: the model's count, or, for a GROBID model that reads
    no feature column and records no count (one imported from DeLFT, which never saw the data),
    the input's own, from its first line (a last field shaped ``I-<x>`` or ``<x>`` is a gold
    label). Columns the model does not read are read and ignored."""
    if labeler.n_features or labeler.encoder.feature_columns or labeler.input_format != "grobid":
        return labeler.n_features
    fields = _first_fields(path)
    return max(len(fields) - (2 if len(fields) > 1 and is_grobid_label(fields[-1]) else 1), 0)


def _first_fields(path: str) -> list[str]:
    """The fields of the first non-blank line; none when unreadable (the reader then names the problem)."""
    return next(iter(_leading_fields(path, 1)), [])


def _leading_fields(path: str, count: int) -> list[list[str]]:
    """The fields of the first ``count`` non-blank lines; none when unreadable. Only a regular
    file is opened: the reader's ``DataError`` otherwise (a device such as ``/dev/zero`` has no
    line end to stop at, and a FIFO would be consumed or wait for a writer)."""
    check_input_file(path)
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            head = handle.read(SNIFF_CHARS)  # bounded: a huge file without a line end is not read whole
    except (OSError, EOFError, zlib.error):
        return []
    lines = head.split("\n")
    if len(head) == SNIFF_CHARS:
        lines.pop()  # perhaps cut
    return list(islice((line.split() for line in lines if line.strip()), count))


SNIFF_CHARS = 1 << 20
"""At most this much of the input is looked at by :func:`_leading_fields`."""


FEATURE_ROWS_CHECKED = 3
"""Leading lines that must all look like the model's GROBID rows before text input is warned about."""


def _warn_if_feature_rows(path: str, labeler: SequenceLabeler) -> None:
    """Warn when text input looks like the GROBID rows a features model was trained on: every
    one of its first lines has the token plus the model's feature columns (a label column
    allowed). As text, each such line would be tagged as a sentence of feature values, a
    plausible-looking but meaningless answer; a few lines of real text rarely share that width."""
    if labeler.input_format != "grobid" or not labeler.n_features:
        return
    widths = {labeler.n_features + 1, labeler.n_features + 2}
    leading = _leading_fields(path, FEATURE_ROWS_CHECKED)
    if len(leading) == FEATURE_ROWS_CHECKED and all(len(fields) in widths for fields in leading):
        logger.warning(
            "%s: its first lines look like GROBID feature rows (a token and %d feature columns, as this "
            "model's training data), but --input-format is text: each line is tagged as a text. "
            "Pass --input-format grobid to tag them as tokens.", path, labeler.n_features)


def set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def evaluate_stream(labeler: SequenceLabeler, sequences: Iterable[TokenSequence], batch_size: int = 64,
                    ctx: DistContext | None = None, chunk: ChunkSize = ChunkSize(),
                    progress: TaggingProgress | None = None) -> dict:
    """:meth:`SequenceLabeler.evaluate` over a stream of labelled sequences, chunk by chunk: only
    the entity counts are kept, and summed over processes once at the end."""
    counts = EntityCounts()
    gold_tags: set[str] = set()
    tally = RunTally(progress)
    for part in chunk.cut(sequences):
        missing = next((s for s in part if s.labels is None), None)
        if missing is not None:
            raise ConfigError(f"evaluation needs labelled data (no labels at line {missing.line})")
        started = time.perf_counter()
        counts.merge(labeler.local_counts(part, batch_size=batch_size, ctx=ctx))
        tally.tally(len(part), sum(map(len, part)), time.perf_counter() - started)
        for sequence in part:
            gold_tags.update(sequence.labels)  # type: ignore[arg-type]
    return labeler.reduced_counts(counts, gold_tags, ctx).scores()
