"""Texts to classify, read lazily: the records ``read_cls(..., labelled=False)`` reads, one at a time.

``cls classify`` streams its input as ``seq tag`` does (see :mod:`textorch.data.streams`): the
file is read block by block and each record handed on once complete, with the same rules and
the same ``DataError`` at ``path:line`` as the whole-file reader, raised when the reading
reaches that line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from textorch.data import cls_readers as whole
from textorch.data.cls_readers import ClsExample
from textorch.data.streams import numbered_lines
from textorch.errors import ConfigError, DataError


def stream_for_classification(path: str | Path, fmt: str, text_column: str | None = None,
                              header: bool = True) -> Iterator[ClsExample]:
    """Unlabelled examples of ``path`` in format ``fmt`` (one of ``INPUT_FORMATS``), in file order."""
    if fmt not in whole.INPUT_FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(whole.INPUT_FORMATS)}")
    name = str(path)
    if fmt == "text":
        records = _lines(name)
    elif fmt == "jsonl":
        records = _jsonl(name, text_column or "text")
    elif fmt == "citation-sentiment":
        records = _citations(name)
    else:
        records = _table(name, fmt, text_column, header)
    return _not_empty(records, name)


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


def _jsonl(path: str, text_key: str) -> Iterator[ClsExample]:
    for number, raw in numbered_lines(path):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(path, number, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        except (RecursionError, ValueError) as exc:
            raise DataError(path, number, f"invalid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise DataError(path, number, f"expected a JSON object, got {type(record).__name__}")
        value = whole._field(record, text_key, path, number, "text")
        if not isinstance(value, str):
            raise DataError(path, number, f"field {text_key!r} must be a string")
        yield ClsExample(whole._nonempty_text(value, path, number), None, number)


def _citations(path: str) -> Iterator[ClsExample]:
    for number, raw in numbered_lines(path):
        if not raw.strip() or raw.startswith("#"):
            continue
        fields = raw.split("\t")
        if len(fields) != 4:
            raise DataError(path, number, f"{len(fields)} tab-separated fields, expected 4 (source, target, sentiment, text)")
        citation = fields[3]
        if len(citation) >= 2 and citation.startswith('"') and citation.endswith('"'):
            citation = citation[1:-1]
        yield ClsExample(whole._nonempty_text(citation, path, number), None, number)


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


def _table(path: str, fmt: str, text_column: str | None, header: bool) -> Iterator[ClsExample]:
    rows = _csv_rows(path, "\t" if fmt == "tsv" else ",")
    names: list[str] | None = None
    if fmt == "licenses":
        names, default = list(whole.LICENSE_COLUMNS), "text"
    elif header:
        first = next(rows, None)
        if first is None:
            raise DataError(path, None, "empty file (a header row was expected)")
        names, default = [n.strip() for n in first[1]], "text"
    else:
        default = "0"
    width = len(names) if names is not None else 0
    text_index = -1 if names is None else whole._column_index(text_column or default, names, width, path, "text")
    for line, fields in rows:
        if width == 0:
            width = len(fields)
        if text_index < 0:
            text_index = whole._column_index(text_column or default, names, width, path, "text")
        if len(fields) != width:
            if fmt == "licenses":
                raise DataError(path, line, f"{len(fields)} fields, expected {width} (text, copyright owner, licence)")
            raise DataError(path, line, f"{len(fields)} fields, expected {width}" + (" (as in the header)" if names is not None else " (as in the first row)"))
        yield ClsExample(whole._nonempty_text(fields[text_index], path, line), None, line)
