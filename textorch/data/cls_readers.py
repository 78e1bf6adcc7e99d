"""Readers for text classification data: CSV, TSV, JSON lines, and the two shared corpora.

Every record becomes a :class:`ClsExample` (text, labels, line). A record is single-label when
one label column holds a class name, multi-label when several label columns hold 0/1 indicators
(the column names are then the classes) or when a JSON field holds a list of class names.

Problems are :class:`DataError` at ``path:line`` (the line where the record starts), raised while
reading, before anything slow starts.

Two DeLFT mistakes are avoided on purpose (see ``../shared/data/classification/README.md``):
the licence CSV has no header row, so its first line is a record; and only citation texts that
are wrapped in double quotes lose them, the 593 unquoted ones are kept whole.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from textorch.data.readers import read_file_text
from textorch.errors import ConfigError, DataError

CLS_FORMATS = ("csv", "tsv", "jsonl", "citation-sentiment", "licenses")
INPUT_FORMATS = ("text", *CLS_FORMATS)
"""Formats ``cls classify`` accepts: plain text (one text per line) plus every labelled format."""

CITATION_CLASSES = {"n": "negative", "o": "neutral", "p": "positive"}
"""The corpus's sentiment letters and the class names DeLFT's citation classifier gives them."""
LICENSE_COLUMNS = ("text", "copyright_owner", "license")
"""Column names of the header-less licence file, in file order."""

_TRUE = {"1", "1.0", "true", "yes"}
_FALSE = {"0", "0.0", "false", "no", ""}


@dataclass
class ClsExample:
    """One text with its labels (None when unlabelled) and the line it starts on."""

    text: str
    labels: tuple[str, ...] | None = None
    line: int = 0


@dataclass
class ClsCorpus:
    """A file's worth of examples and how their labels are to be read."""

    examples: list[ClsExample]
    path: str = "<memory>"
    format: str = "csv"
    multi_label: bool = False
    classes: list[str] | None = None
    """Fixed class list when the file defines it (indicator columns); None: classes come from the labels."""
    label_columns: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def labelled(self) -> bool:
        return all(e.labels is not None for e in self.examples)

    def label_set(self) -> list[str]:
        """Classes present, in the file's order for indicator columns, else sorted."""
        if self.classes is not None:
            return list(self.classes)
        return sorted({label for e in self.examples for label in (e.labels or ())})


def detect_format(path: str | Path, labelled: bool = True) -> str:
    """The format implied by the extension; a ``.txt`` file is sniffed for the citation layout.

    Raises:
        ConfigError: when the extension says nothing, naming the ``--format`` choices.
    """
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    if suffix == ".csv":
        return "csv"
    if suffix == ".tsv":
        return "tsv"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".txt" and _looks_like_citations(path):
        return "citation-sentiment"
    if not labelled and suffix in (".txt", ""):
        return "text"
    choices = ", ".join(CLS_FORMATS if labelled else INPUT_FORMATS)
    raise ConfigError(f"{path}: cannot tell the format from the file name; pass --format ({choices})")


def _looks_like_citations(path: str | Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip() and not line.startswith("#"):
                    fields = line.rstrip("\n").split("\t")
                    return len(fields) == 4 and fields[2] in CITATION_CLASSES
    except OSError:
        return False
    return False


def read_cls(
    path: str | Path,
    format: str | None = None,
    text_column: str | None = None,
    label_columns: list[str] | tuple[str, ...] = (),
    header: bool = True,
    labelled: bool = True,
) -> ClsCorpus:
    """Read a classification file; ``labelled=False`` ignores (and does not need) label columns.

    Args:
        text_column: column name, or 0-based index; default ``text`` (with a header) or ``0``.
        label_columns: one for single-label, several 0/1 indicator columns for multi-label;
            default ``label`` (with a header) or the last column.
        header: whether a CSV/TSV file starts with a header row.
    """
    fmt = format or detect_format(path, labelled)
    if fmt not in INPUT_FORMATS or (labelled and fmt == "text"):
        choices = ", ".join(CLS_FORMATS if labelled else INPUT_FORMATS)
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {choices}")
    text = read_file_text(path)
    if fmt == "citation-sentiment":
        corpus = _read_citations(text, str(path), labelled)
    elif fmt == "text":
        corpus = _read_lines(text, str(path))
    elif fmt == "jsonl":
        corpus = _read_jsonl(text, str(path), text_column or "text", list(label_columns) or ["label"], labelled)
    else:
        if fmt == "licenses":
            rows = _csv_rows(text, str(path), ",")
            _check_width(rows, len(LICENSE_COLUMNS), str(path))
            names: list[str] | None = list(LICENSE_COLUMNS)
            defaults = ("text", ["license"])
        else:
            rows = _csv_rows(text, str(path), "," if fmt == "csv" else "\t")
            names = None
            if header:
                if not rows:
                    raise DataError(path, None, "empty file (a header row was expected)")
                names = [n.strip() for n in rows[0][1]]
                rows = rows[1:]
            defaults = ("text", ["label"]) if header else ("0", None)
        text_spec = text_column or defaults[0]
        label_specs = list(label_columns) or defaults[1]
        corpus = _table_corpus(rows, names, text_spec, label_specs, str(path), fmt, labelled)
    if not corpus.examples:
        raise DataError(path, None, "no records found")
    return corpus


# ----------------------------------------------------------------------------- tables
def _csv_rows(text: str, path: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """``(start line, fields)`` per non-blank record; TSV has no quoting (texts hold lone quotes)."""
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, quoting=quoting, strict=True)
    rows: list[tuple[int, list[str]]] = []
    previous_end = 0
    try:
        for fields in reader:
            start = previous_end + 1
            previous_end = reader.line_num
            if fields and any(f.strip() for f in fields):
                rows.append((start, fields))
    except csv.Error as exc:
        raise DataError(path, previous_end + 1, f"malformed {'CSV' if delimiter == ',' else 'TSV'} record ({exc})") from None
    return rows


def _check_width(rows: list[tuple[int, list[str]]], width: int, path: str) -> None:
    for line, fields in rows:
        if len(fields) != width:
            raise DataError(path, line, f"{len(fields)} fields, expected {width} (text, copyright owner, licence)")


def _column_index(spec: str, names: list[str] | None, width: int, path: str, role: str) -> int:
    """Index of a column given by name (with a header) or by 0-based position."""
    if names is not None and spec in names:
        return names.index(spec)
    if spec.lstrip("-").isdigit():
        index = int(spec)
        if -width <= index < width:
            return index % width
    where = f"the header has: {', '.join(names)}" if names is not None else f"rows have {width} columns (0-based index)"
    raise DataError(path, 1, f"no {role} column {spec!r}; {where}")


def _table_corpus(
    rows: list[tuple[int, list[str]]],
    names: list[str] | None,
    text_spec: str,
    label_specs: list[str] | None,
    path: str,
    fmt: str,
    labelled: bool,
) -> ClsCorpus:
    width = len(names) if names is not None else (len(rows[0][1]) if rows else 0)
    text_index = _column_index(text_spec, names, width, path, "text")
    label_indices: list[int] = []
    if labelled:
        specs = label_specs if label_specs is not None else [str(width - 1)]
        label_indices = [_column_index(s, names, width, path, "label") for s in specs]
    label_names = [names[i] if names is not None else str(i) for i in label_indices]
    multi = len(label_indices) > 1
    examples = []
    for line, fields in rows:
        if len(fields) != width:
            raise DataError(path, line, f"{len(fields)} fields, expected {width}" + (" (as in the header)" if names is not None else " (as in the first row)"))
        text = _nonempty_text(fields[text_index], path, line)
        labels = None
        if labelled:
            values = [fields[i].strip() for i in label_indices]
            labels = _indicator_labels(values, label_names, path, line) if multi else _single(values[0], label_names[0], path, line)
        examples.append(ClsExample(text, labels, line))
    return ClsCorpus(examples, path, fmt, multi, label_names if multi else None, label_names)


def _nonempty_text(text: str, path: str, line: int) -> str:
    if not text.strip():
        raise DataError(path, line, "empty text")
    return text


def _single(value: str, column: str, path: str, line: int) -> tuple[str, ...]:
    if not value:
        raise DataError(path, line, f"empty label in column {column!r}")
    return (value,)


def _indicator_labels(values: list[str], classes: list[str], path: str, line: int) -> tuple[str, ...]:
    """Multi-label indicator columns: ``1``/``0`` (also true/false, yes/no; empty is 0)."""
    positives = []
    for value, name in zip(values, classes):
        lowered = value.lower()
        if lowered in _TRUE:
            positives.append(name)
        elif lowered not in _FALSE:
            raise DataError(path, line, f"column {name!r} holds {value!r}; multi-label columns must be 0 or 1")
    return tuple(positives)


# ----------------------------------------------------------------------------- JSON lines
def json_record(raw: str, path: str, number: int) -> dict:
    """One JSON-lines record (an object), or a DataError naming the file and line; the whole-file
    and the streamed readers both read records here."""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DataError(path, number, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep, a number too long for int
        raise DataError(path, number, f"invalid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise DataError(path, number, f"expected a JSON object, got {type(record).__name__}")
    return record


def _read_jsonl(text: str, path: str, text_key: str, label_keys: list[str], labelled: bool) -> ClsCorpus:
    examples = []
    list_labels = False
    multi = len(label_keys) > 1
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        record = json_record(raw, path, number)
        value = _field(record, text_key, path, number, "text")
        if not isinstance(value, str):
            raise DataError(path, number, f"field {text_key!r} must be a string")
        labels = None
        if labelled:
            found = [_field(record, key, path, number, "label") for key in label_keys]
            if multi:
                labels = _indicator_labels([_scalar(v).strip() for v in found], label_keys, path, number)
            elif isinstance(found[0], list):
                list_labels = True
                labels = tuple(sorted({_scalar(v) for v in found[0]}))
            else:
                labels = _single(_scalar(found[0]).strip(), label_keys[0], path, number)
        examples.append(ClsExample(_nonempty_text(value, path, number), labels, number))
    # A label field holding lists makes the whole file multi-label, even rows with a plain string.
    classes = label_keys if multi else None
    return ClsCorpus(examples, path, "jsonl", multi or list_labels, classes, label_keys)


def _field(record: dict, key: str, path: str, line: int, role: str) -> object:
    if key not in record:
        raise DataError(path, line, f"no {role} field {key!r}; fields: {', '.join(map(str, record))}")
    return record[key]


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if value is None:
        return ""
    return str(value)


# ----------------------------------------------------------------------------- the shared corpora
def _read_citations(text: str, path: str, labelled: bool) -> ClsCorpus:
    """Athar's corpus: ``#`` comments, then ``source <TAB> target <TAB> letter <TAB> text``."""
    lines = enumerate(text.split("\n"), start=1)
    examples = [e for number, raw in lines if (e := citation_example(raw, number, path, labelled)) is not None]
    return ClsCorpus(examples, path, "citation-sentiment", False, None, ["sentiment"])


def citation_example(raw: str, number: int, path: str, labelled: bool) -> ClsExample | None:
    """One line of Athar's corpus as an example (None for a blank or ``#`` line); the whole-file
    and the streamed readers both read it here."""
    if not raw.strip() or raw.startswith("#"):
        return None
    fields = raw.split("\t")
    if len(fields) != 4:
        raise DataError(path, number, f"{len(fields)} tab-separated fields, expected 4 (source, target, sentiment, text)")
    letter, citation = fields[2].strip(), fields[3]
    if len(citation) >= 2 and citation.startswith('"') and citation.endswith('"'):
        citation = citation[1:-1]
    labels = None
    if labelled:
        if letter not in CITATION_CLASSES:
            raise DataError(path, number, f"sentiment {letter!r} is not one of: {', '.join(CITATION_CLASSES)}")
        labels = (CITATION_CLASSES[letter],)
    return ClsExample(_nonempty_text(citation, path, number), labels, number)


def _read_lines(text: str, path: str) -> ClsCorpus:
    """Plain text to classify: one text per line; a blank line is an error, not a silent skip."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    examples = [ClsExample(_nonempty_text(line, path, number), None, number) for number, line in enumerate(lines, start=1)]
    return ClsCorpus(examples, path, "text", False, None, [])
