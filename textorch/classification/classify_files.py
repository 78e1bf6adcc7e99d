"""Classifying files with a saved classifier, and scoring it on labelled files: reading them with
the model's column settings, chunk by chunk, timing the call. ``cls classify``'s JSON document
(which the server answers too) is :mod:`textorch.classification.answer`'s."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace

from textorch.classification.classifier import TextClassifier
from textorch.classification.config import ClsDataConfig
from textorch.classification.prediction import ClsPrediction
from textorch.data.streams import ChunkSize, until_error
from textorch.data.cls_readers import ClsCorpus, ClsExample, detect_format, read_cls
from textorch.data.cls_streams import ClsStream, stream_for_classification as stream_examples
from textorch.errors import ConfigError, TextorchError
from textorch.runtime.progress import RunTally, TaggingProgress
from textorch.runtime.write_errors import write_report
from textorch.train.dist import DistContext
from textorch.train.dist_eval import reduce_counts


def read_labelled(path: str, data_config: ClsDataConfig) -> ClsCorpus:
    return read_cls(path, data_config.format, data_config.text_column, data_config.label_columns, data_config.header)


def evaluate_classifier(classifier: TextClassifier, test_path: str, overrides: dict | None = None, ctx: DistContext | None = None,
                        batch_size: int = 64) -> dict:
    """Scores of a loaded model on a labelled file read with the model's column settings (or ``overrides``)."""
    data_config = replace(classifier.data_config, **{k: v for k, v in (overrides or {}).items() if v not in (None, ())})
    if not (overrides or {}).get("format"):
        data_config = replace(data_config, format=_default_format(test_path, classifier.data_config.format, True))
    return classifier.evaluate(read_labelled(test_path, data_config), ctx=ctx, batch_size=batch_size)


def evaluate_streamed(classifier: TextClassifier, test_path: str, overrides: dict | None = None,
                      ctx: DistContext | None = None, batch_size: int = 64, chunk: ChunkSize = ChunkSize(),
                      progress: TaggingProgress | None = None) -> dict:
    """:func:`evaluate_classifier`, reading the file chunk by chunk: only the counts are kept,
    summed over processes once at the end."""
    data_config = replace(classifier.data_config, **{k: v for k, v in (overrides or {}).items() if v not in (None, ())})
    if not (overrides or {}).get("format"):
        data_config = replace(data_config, format=_default_format(test_path, classifier.data_config.format, True))
    fmt = data_config.format or detect_format(test_path, True)
    stream = ClsStream(test_path, fmt, data_config.text_column, data_config.label_columns, data_config.header, labelled=True)
    # JSON lines with one label field are multi-label when any record holds a list: a multi-label
    # model counts plain strings as one-label sets meanwhile, and the file must show a list by its end.
    awaits_list = classifier.multi_label and fmt == "jsonl" and len(data_config.label_columns or ["label"]) == 1
    counts = None
    tally = RunTally(progress)
    for part in chunk.cut(iter(stream), text_tokens):
        started = time.perf_counter()
        corpus = ClsCorpus(part, test_path, fmt, stream.multi_label or awaits_list, stream.classes, stream.label_columns)
        data = classifier.text_encoder.encode([e.text for e in part], classifier.targets(corpus))
        scored = classifier.local_counts(data, ctx=ctx, batch_size=batch_size)
        tally.tally(len(part), sum(map(text_tokens, part)), time.perf_counter() - started)
        counts = scored if counts is None else counts.merge(scored)
    if awaits_list and not stream.list_labels:
        classifier.targets(ClsCorpus([], test_path, fmt, False))  # the whole-file reader's refusal
    return reduce_counts(counts, classifier.classes, ctx or DistContext()).scores()  # type: ignore[arg-type]


def _default_format(path: str, trained_on: str | None, labelled: bool) -> str | None:
    """The file name decides (``.txt`` is sniffed), but a ``.csv`` file keeps the header-less licence layout
    when the model was trained on it; a name that says nothing falls back to the training format."""
    try:
        detected = detect_format(path, labelled)
    except ConfigError:
        return trained_on
    return "licenses" if trained_on == "licenses" and detected == "csv" else detected


def read_for_classification(path: str, input_format: str | None, classifier: TextClassifier) -> ClsCorpus:
    """Texts to classify; labels in a labelled format are ignored."""
    config = classifier.data_config
    fmt = input_format or _default_format(path, config.format, False)
    return read_cls(path, fmt, config.text_column, (), config.header, labelled=False)


def stream_for_classification(path: str, input_format: str | None, classifier: TextClassifier) -> Iterator[ClsExample]:
    """The examples :func:`read_for_classification` reads, one at a time, as the file is read."""
    config = classifier.data_config
    fmt = input_format or _default_format(path, config.format, False)
    return stream_examples(path, fmt, config.text_column, config.header)


def text_tokens(example: ClsExample) -> int:
    """A text's tokens for the chunk rule and the tally: its whitespace-separated words, a measure
    that needs no model (each classifier tokenises its own way, after the chunk is cut)."""
    return len(example.text.split())


class ClassificationRun(RunTally):
    """Classify a stream of examples chunk by chunk: iterate for ``(examples, predictions)`` pairs.

    As :class:`textorch.tagging.tag_files.TaggingRun`, with the same chunk rule and tally (a text
    counts as a sequence, its words as tokens, ``tag_s`` the seconds in ``predict``): with several
    processes each classifies its share of every chunk and all receive the chunk's predictions in
    input order; a data error ends the run once the examples read before it are classified.
    """

    def __init__(self, classifier: TextClassifier, examples: Iterable[ClsExample], batch_size: int = 64,
                 ctx: DistContext | None = None, chunk: ChunkSize = ChunkSize(), progress: TaggingProgress | None = None) -> None:
        super().__init__(progress)
        self.classifier = classifier
        self.examples = examples
        self.batch_size = batch_size
        self.ctx = ctx
        self.chunk = chunk

    def __iter__(self) -> Iterator[tuple[list[ClsExample], list[ClsPrediction]]]:
        failure: list[TextorchError] = []
        for part in self.chunk.cut(until_error(self.examples, failure), text_tokens):
            started = time.perf_counter()
            predictions = self.classifier.predict([e.text for e in part], self.batch_size, self.ctx)
            self.tally(len(part), sum(map(text_tokens, part)), time.perf_counter() - started)
            yield part, predictions
        if failure:
            raise failure[0]




def classify_texts(classifier: TextClassifier, texts: list[str], batch_size: int = 64,
                   ctx: DistContext | None = None) -> tuple[list[ClsPrediction], float]:
    started = time.perf_counter()
    predictions = classifier.predict(texts, batch_size, ctx)
    return predictions, time.perf_counter() - started


def write_json(document: dict | None, path: str | None, option: str = "--metrics-json") -> None:
    if path and document is not None:
        write_report(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", option)
