"""Texts to classify, read lazily: the records ``read_cls(..., labelled=False)`` reads, one at a time.

``cls classify`` streams its input as ``seq tag`` does (see :mod:`textorch.data.streams`): the
file is read block by block and each record handed on once complete, with the same rules and
the same ``DataError`` at ``path:line`` as the whole-file reader, raised when the reading
reaches that line.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from textorch.data import cls_readers as whole
from textorch.data.cls_readers import ClsExample
from textorch.data.streams import numbered_lines
from textorch.errors import ConfigError, DataError


def stream_for_classification(path: str | Path, fmt: str, text_column: str | None = None,
                              header: bool = True) -> Iterator[ClsExample]:
    """Unlabelled examples of ``path`` in format ``fmt`` (one of ``INPUT_FORMATS``), in file order."""
    return iter(ClsStream(path, fmt, text_column, header=header))


class ClsStream:
    """The examples ``read_cls`` reads, one at a time; iterate it once.

    What the whole-file reader puts on its corpus is known here as the reading goes:
    ``label_columns``, ``classes`` (indicator columns) and ``multi_label`` once the header is
    read, and for JSON lines ``list_labels`` once a label field holding a list has been met
    (which makes the whole file multi-label).
    """

    def __init__(self, path: str | Path, fmt: str, text_column: str | None = None, label_columns: list[str] | tuple[str, ...] = (),
                 header: bool = True, labelled: bool = False) -> None:
        if fmt not in whole.INPUT_FORMATS or (labelled and fmt == "text"):
            choices = ", ".join(whole.CLS_FORMATS if labelled else whole.INPUT_FORMATS)
            raise ConfigError(f"unknown format {fmt!r}; choose one of: {choices}")
        self.path = str(path)
        self.format = fmt
        self.text_column = text_column
        self.header = header
        self.labelled = labelled
        self.label_columns: list[str] = list(label_columns)
        self.classes: list[str] | None = None
        self.multi = False
        self.list_labels = False

    @property
    def multi_label(self) -> bool:
        return self.multi or self.list_labels

    def __iter__(self) -> Iterator[ClsExample]:
        path, fmt = self.path, self.format
        if fmt == "text":
            records = _lines(path)
        elif fmt == "jsonl":
            records = self._jsonl()
        elif fmt == "citation-sentiment":
            self.label_columns = ["sentiment"]
            records = self._citations()
        else:
            records = self._table()
        return _not_empty(records, path)

    def _jsonl(self) -> Iterator[ClsExample]:
        path, text_key = self.path, self.text_column or "text"
        keys = self.label_columns = self.label_columns or ["label"]
        self.multi = len(keys) > 1
        self.classes = keys if self.multi else None
        for number, raw in numbered_lines(path):
            if not raw.strip():
                continue
            record = whole.json_record(raw, path, number)
            value = whole._field(record, text_key, path, number, "text")
            if not isinstance(value, str):
                raise DataError(path, number, f"field {text_key!r} must be a string")
            labels = None
            if self.labelled:
                found = [whole._field(record, key, path, number, "label") for key in keys]
                if self.multi:
                    labels = whole._indicator_labels([whole._scalar(v).strip() for v in found], keys, path, number)
                elif isinstance(found[0], list):
                    self.list_labels = True
                    labels = tuple(sorted({whole._scalar(v) for v in found[0]}))
                else:
                    labels = whole._single(whole._scalar(found[0]).strip(), keys[0], path, number)
            yield ClsExample(whole._nonempty_text(value, path, number), labels, number)

    def _citations(self) -> Iterator[ClsExample]:
        for number, raw in numbered_lines(self.path):
            example = whole.citation_example(raw, number, self.path, self.labelled)
            if example is not None:
                yield example

    def _table(self) -> Iterator[ClsExample]:
        path, fmt = self.path, self.format
        rows = _csv_rows(path, "\t" if fmt == "tsv" else ",")
        names: list[str] | None = None
        if fmt == "licenses":
            names, defaults = list(whole.LICENSE_COLUMNS), ("text", ["license"])
        elif self.header:
            first = next(rows, None)
            if first is None:
                raise DataError(path, None, "empty file (a header row was expected)")
            names, defaults = [n.strip() for n in first[1]], ("text", ["label"])
        else:
            defaults = ("0", None)
        width = len(names) if names is not None else 0
        text_index = -1
        label_indices: list[int] = []
        for line, fields in rows:
            if text_index < 0:  # the layout: from the header, else from the first row
                width = width or len(fields)
                text_index = whole._column_index(self.text_column or defaults[0], names, width, path, "text")
                if self.labelled:
                    specs = self.label_columns or defaults[1] or [str(width - 1)]
                    label_indices = [whole._column_index(spec, names, width, path, "label") for spec in specs]
                self.label_columns = [names[i] if names is not None else str(i) for i in label_indices]
                self.multi = len(label_indices) > 1
                self.classes = self.label_columns if self.multi else None
            if len(fields) != width:
                if fmt == "licenses":
                    raise DataError(path, line, f"{len(fields)} fields, expected {width} (text, copyright owner, licence)")
                where = " (as in the header)" if names is not None else " (as in the first row)"
                raise DataError(path, line, f"{len(fields)} fields, expected {width}{where}")
            labels = None
            if self.labelled:
                values = [fields[i].strip() for i in label_indices]
                labels = (whole._indicator_labels(values, self.label_columns, path, line) if self.multi
                          else whole._single(values[0], self.label_columns[0], path, line))
            yield ClsExample(whole._nonempty_text(fields[text_index], path, line), labels, line)


def _not_empty(records: Iterator[ClsExample], path: str) -> Iterator[ClsExample]:
    seen = False
    for record in records:
        seen = True
        yield record
    if not seen:
        raise DataError(path, None, "no records found")


def _lines(path: str) -> Iterator[ClsExample]:
    pending: tuple[int, str] | None = None
    for numbered in numbered_lines(path):
        if pending is not None:
            yield ClsExample(whole._nonempty_text(pending[1], path, pending[0]), None, pending[0])
        pending = numbered
    if pending is not None and pending[1] != "":
        yield ClsExample(whole._nonempty_text(pending[1], path, pending[0]), None, pending[0])


def _csv_rows(path: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """``(start line, fields)`` per non-blank record, as ``cls_readers._csv_rows`` gives them."""
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    reader = csv.reader((line + "\n" for _, line in numbered_lines(path)), delimiter=delimiter, quoting=quoting, strict=True)
    previous_end = 0
    try:
        for fields in reader:
            start = previous_end + 1
            previous_end = reader.line_num
            if fields and any(f.strip() for f in fields):
                yield start, fields
    except csv.Error as exc:
        raise DataError(path, previous_end + 1, f"malformed {'CSV' if delimiter == ',' else 'TSV'} record ({exc})") from None
