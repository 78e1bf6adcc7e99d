"""Validation of labelled data before training: every problem at once, each at ``file:line``.

The readers stop at the first problem, which is right when tagging but costly before a long
training run: fix one line, start again, meet the next. This module walks the same lines with
the reader's own rules (``readers.split_fields``, ``tags.validate_label``...) but collects every
problem, then summarises the data. The corpus it returns is parsed by the reader itself from
the file's lines, with the lines of bad sequences blanked when asked to skip them, so the line
numbers stay those of the file and nothing is parsed twice.

Errors (training refuses the data unless told to skip the sequences concerned):

- a file that cannot be read or has no token line, or whose format cannot be detected;
- a line that is not valid UTF-8;
- a line whose number of columns differs from the file's (its most frequent count), or a count
  the format does not allow (CoNLL: 2 to 4; GROBID: at least token and label);
- a label outside the scheme (CoNLL: ``O``, ``B-/I-/E-/S-X``; GROBID: ``I-<x>``, ``<x>``) or,
  when the format was detected, a label of the other format (``I-<x>`` in a CoNLL file);
- in an IOBES CoNLL file, a continuation with no opener: an ``I-X`` or ``E-X`` that does not
  follow ``B-X`` or ``I-X``.

Warnings (reported, never blocking):

- IOB1 against IOB2. ``I-X`` after a token outside ``X`` is how IOB1 opens an entity, so it is
  valid. A file mixing both conventions (some entities opened by ``I-``, others by ``B-``) gets
  a warning at each line of the rarer one; both read as the same IOB2 ``B-X``, so training is
  not affected. CoNLL-2003's ``eng.train`` has two such lines (IOB1 with a ``B-MISC`` after O).
- a control character inside a line (NUL, a carriage return not followed by a line feed...);
- a document with no sequence;
- a label type of the validation or test file that the training file never uses;
- GROBID files as GROBID writes them, which Wapiti and DeLFT train on (one line each, with a
  count and the first places): a field opened by its continuation label ``<x>`` (at a sequence's
  start or after a token of another field; GROBID's alignment drops a field's first token when it
  cannot match it), read as the field's start, and sequences whose number of feature columns
  differs from the file's (each sequence keeps its own count).

Sequences longer than the maximum sequence length are no problem: training reads them in
consecutive pieces that keep every token (``splits.training_pieces`` says so once in the log),
tagging reads them whole. They are counted (``FileCheck.long_lines``) for ``seq validate``'s
summary.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from pathlib import Path

from textorch.data.findings import (
    ERROR,
    WARNING,
    FileCheck,
    ValidationReport,
    grobid_departures,
    label_counts,
)
from textorch.data.readers import (
    CONLL_COLUMNS,
    LABELLED_FORMATS,
    decode_utf8,
    is_blank,
    is_document_marker,
    label_kind,
    locate_utf8_error,
    parse_labelled_text,
    read_file_bytes,
    split_fields,
)
from textorch.data.tags import GROBID_OTHER_SUFFIX, OUTSIDE, validate_label
from textorch.errors import ConfigError, DataError

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_DETECT_SAMPLE = 1000
"""Token lines whose labels decide the format when it is not given."""
_UNKNOWN = "\x00unknown"
"""Previous label type after a malformed line: opener checks are suspended until the next one."""


def _decode_lines(data: bytes, check: FileCheck) -> list[str]:
    """The file's lines as the reader sees them; undecodable lines reported and kept, replaced."""
    try:
        return decode_utf8(data, check.path).split("\n")
    except DataError:
        pass
    lines = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            check.add(lineno, locate_utf8_error(raw, exc)[1])
            line = raw.decode("utf-8", errors="replace")
        lines.append(line[:-1] if line.endswith("\r") else line)
    if lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def _prescan(lines: list[str]) -> tuple[Counter, Counter]:
    """Label kinds of the first token lines (to detect the format) and field counts of all.

    Document markers are left out of both, as the reader's format detection leaves them out.
    """
    kinds: Counter = Counter()
    columns: Counter = Counter()
    sampled = 0
    for line in lines:
        if is_blank(line):
            continue
        fields = split_fields(line)
        if is_document_marker(fields):
            continue
        columns[len(fields)] += 1
        if len(fields) > 1 and sampled < _DETECT_SAMPLE:
            kinds[label_kind(fields[-1])] += 1
            sampled += 1
    kinds.pop(None, None)
    return kinds, columns


def _detect(kinds: Counter, check: FileCheck) -> str | None:
    """The format most labels point to; a whole-file error when none does."""
    if not kinds:
        check.add(None, "cannot detect the format: no line ends with a CoNLL tag (O, B-X, I-X, E-X, S-X) "
                        "or a GROBID label (I-<x>, <x>); pass --format")
        return None
    return kinds.most_common(1)[0][0]


def _column_rule(counts: Counter, fmt: str) -> tuple[int, str]:
    """The expected field count (the most frequent one) and how to describe a departure from it."""
    if not counts:
        return 0, ""
    expected, seen = counts.most_common(1)[0]
    total = sum(counts.values())
    if fmt == "conll" and expected not in CONLL_COLUMNS:
        return -1, "expected 2 to 4 columns (token ... tag)"
    if fmt == "grobid" and expected < 2:
        return -1, "expected at least 2 fields (token and label)"
    noun = "columns" if fmt == "conll" else "fields"
    return expected, f"expected {expected} {noun} (as on {seen} of {total} token lines)"


class _Walker:
    """One pass over a file's lines: sequence boundaries, columns, labels, openers."""

    def __init__(self, check: FileCheck, fmt: str, max_length: int, detected: bool) -> None:
        self.check = check
        self.fmt = fmt
        self.detected = detected
        self.max_length = max_length
        self.label_errors: dict[str, str | None] = {}
        self.spans: list[tuple[int, int]] = []
        self.start = -1
        self.previous = ""
        # CoNLL openers (line, label), judged once the whole file is seen
        self.i_openers: list[tuple[int, str]] = []
        self.b_openers: list[tuple[int, str]] = []
        self.iobes = False
        # GROBID: this sequence's field count, and the departures from the file's common layout
        # that DeLFT reads as they are (reported once each, as warnings)
        self.sequence_fields = 0
        self.sequence_field_line = 0
        self.other_widths: list[tuple[int, int]] = []
        self.open_continuations: list[int] = []

    def run(self, lines: list[str], columns: Counter) -> None:
        expected, describe = _column_rule(columns, self.fmt)
        document_line, document_sequences = 0, 0
        for index, line in enumerate(lines):
            if is_blank(line):
                self.flush(index)
                continue
            fields = split_fields(line)
            if self.fmt == "conll" and is_document_marker(fields):
                self.flush(index)
                if document_line and not document_sequences:
                    self.check.add(document_line, "document with no sequence", WARNING)
                document_line = 0 if fields[0] == "#end" else index + 1
                document_sequences = 0
                continue
            if self.start < 0:
                self.start, self.previous = index, ""
                document_sequences += 1
                self.sequence_fields, self.sequence_field_line = len(fields), index + 1
                if self.fmt == "grobid" and expected > 0 and len(fields) >= 2 and len(fields) != expected:
                    self.other_widths.append((index + 1, len(fields)))
            self.check_line(index + 1, line, fields, *self.line_rule(expected, describe))
        self.flush(len(lines))
        if document_line and not document_sequences:
            self.check.add(document_line, "document with no sequence", WARNING)
        if self.fmt == "conll":
            self.judge_conll_openers()
        else:
            self.report_grobid_departures(expected)

    def line_rule(self, expected: int, describe: str) -> tuple[int, str]:
        """GROBID: a sequence keeps the field count of its first line, whatever the file's."""
        if self.fmt != "grobid" or self.sequence_fields < 2 or self.sequence_fields == expected:
            return expected, describe
        return self.sequence_fields, (f"expected {self.sequence_fields} fields (as on line "
                                      f"{self.sequence_field_line}, the first of this sequence)")

    def report_grobid_departures(self, expected: int) -> None:
        """One warning per kind: sequences of another width, fields opened by a continuation."""
        for line, message in grobid_departures(self.check.path, expected, self.other_widths, self.open_continuations):
            self.check.add(line, message, WARNING)

    def flush(self, end: int) -> None:
        if self.start < 0:
            return
        length = end - self.start  # a span is made of token lines only
        self.spans.append((self.start, end))
        self.check.lengths.append(length)
        if self.max_length and length > self.max_length:
            self.check.long_lines.append(self.start + 1)
        self.start = -1

    def check_line(self, lineno: int, line: str, fields: list[str], expected: int, describe: str) -> None:
        control = _CONTROL.search(line)
        if control:
            char = control.group()
            hint = " (a carriage return without line feed: old Mac line endings?)" if char == "\r" else ""
            self.check.add(lineno, f"control character U+{ord(char):04X} in the line{hint}", WARNING)
        if len(fields) != expected:
            self.check.add(lineno, f"{describe}, found {len(fields)}")
            self.previous = _UNKNOWN
            return
        label = fields[-1]
        if label not in self.label_errors:
            self.label_errors[label] = self.label_error(label)
        error = self.label_errors[label]
        if error is not None:
            self.check.add(lineno, error)
            self.previous = _UNKNOWN
        elif self.fmt == "grobid":
            self.grobid_opener(lineno, label)
        else:
            self.conll_opener(lineno, label)

    def label_error(self, label: str) -> str | None:
        """Outside the scheme; or, in a detected format, a label of the other format.

        ``I-<x>`` fits CoNLL's scheme too, but in a file detected as CoNLL it is a GROBID
        label gone astray; the reader refuses such a mix when it detects the format.
        """
        error = validate_label(label, self.fmt)
        kind = label_kind(label)
        if error is None and self.detected and kind != self.fmt:
            names = {"conll": "CoNLL", "grobid": "GROBID"}
            error = (f"{label!r} is a {names[kind]} label but the data was detected as "
                     f"{names[self.fmt]} (from most labels); pass --format if that is right")
        return error

    def grobid_opener(self, lineno: int, label: str) -> None:
        """A continuation ``<x>`` with no opener opens its field: GROBID's trainers write one where
        their alignment dropped the field's first token, and a CRF (Wapiti's) reads it so."""
        opens = label.startswith("I-")
        typ = label[2:] if opens else label
        if not opens and self.previous not in (typ, _UNKNOWN) and not label.endswith(GROBID_OTHER_SUFFIX):
            self.open_continuations.append(lineno)
        self.previous = typ

    def conll_opener(self, lineno: int, label: str) -> None:
        if label == OUTSIDE:
            self.previous = ""
            return
        prefix, typ = label[0], label[2:]
        if prefix in "ES":
            self.iobes = True
        if typ != self.previous and self.previous != _UNKNOWN:
            if prefix in "IE":
                self.i_openers.append((lineno, label))
            elif prefix == "B":
                self.b_openers.append((lineno, label))
        self.previous = "" if prefix in "ES" else typ

    def judge_conll_openers(self) -> None:
        """IOBES: a continuation with no opener is an error. IOB1/IOB2: warn on the rarer style."""
        check = self.check
        if self.iobes:
            check.scheme = "iobes"
            for lineno, label in self.i_openers:
                check.add(lineno, f"continuation label {label!r} with no opener (IOBES file: expected "
                                  f"B-{label[2:]} or S-{label[2:]} here)")
            return
        iob1 = len(self.i_openers) >= len(self.b_openers) and bool(self.i_openers)
        check.scheme = "iob1" if iob1 else "iob2"
        if not (self.i_openers and self.b_openers):
            return
        if iob1:
            first = self.i_openers[0][0]
            for lineno, label in self.b_openers:
                check.add(lineno, f"{label!r} after a token outside {label[2:]}: this file is IOB1 (I- opens "
                                  f"entities, as on line {first}), where B- only separates two adjacent "
                                  "entities; read as the start of an entity", WARNING)
        else:
            first = self.b_openers[0][0]
            for lineno, label in self.i_openers:
                check.add(lineno, f"{label!r} with no opener: this file is IOB2 (B- opens entities, as on "
                                  f"line {first}); read as B-{label[2:]}", WARNING)


def check_file(path: str | Path, role: str = "train", format: str | None = None,
               max_sequence_length: int = 0, detected: bool = False) -> FileCheck:
    """Validate one labelled file; never raises for anything found in the file.

    ``format`` None detects it from the labels. ``detected`` says that a given format was itself
    detected (from the training file): labels of the other format are then errors too.
    """
    check = FileCheck(str(path), role, max_length=max_sequence_length)
    try:
        data = read_file_bytes(path)
    except DataError as exc:
        check.add(None, exc.message)
        return check
    lines = _decode_lines(data, check)
    kinds, columns = _prescan(lines)
    if not columns:
        check.add(None, "no sequences: the file has no token line")
        return check
    check.format = format or _detect(kinds, check)
    if check.format is None:
        return check
    walker = _Walker(check, check.format, max_sequence_length, detected or format is None)
    walker.run(lines, columns)
    check.problems.sort(key=lambda problem: problem.line or 0)
    _drop_bad_sequences(check, walker.spans, lines)
    check.corpus = parse_labelled_text("\n".join(lines), path, check.format)
    return check


def _drop_bad_sequences(check: FileCheck, spans: list[tuple[int, int]], lines: list[str]) -> None:
    """Record which sequences hold an error and blank their lines, keeping line numbers."""
    starts = [start for start, _ in spans]
    for line in {p.line for p in check.errors if p.line is not None}:
        index = line - 1
        sequence = bisect_right(starts, index) - 1
        if sequence >= 0 and index < spans[sequence][1]:
            check.bad_sequences.add(sequence)
        else:  # outside any sequence (an undecodable document marker): drop the line alone
            lines[index] = ""
    for sequence in check.bad_sequences:
        start, end = spans[sequence]
        lines[start:end] = [""] * (end - start)


def validate_data(train: str | Path, valid: str | Path | None = None, test: str | Path | None = None,
                  format: str | None = None, max_sequence_length: int = 0) -> ValidationReport:
    """Check the files of a run; validation and test files are read in the training file's format."""
    if format is not None and format not in LABELLED_FORMATS:
        choices = ", ".join(repr(name) for name in LABELLED_FORMATS)
        raise ConfigError(f"unknown format {format!r}: choose one of {choices} (or none, to detect it)")
    files = [check_file(train, "train", format, max_sequence_length)]
    detected = format is None
    format = format or files[0].format
    for role, path in (("valid", valid), ("test", test)):
        if path is not None:
            files.append(check_file(path, role, format, max_sequence_length, detected))
    _unseen_labels(files)
    return ValidationReport(files)


def _unseen_labels(files: list[FileCheck]) -> None:
    """Warn about label types the model cannot learn: absent from the training file."""
    train = files[0].corpus
    if train is None:
        return
    known = set(label_counts(train))
    for check in files[1:]:
        if check.corpus is None:
            continue
        for typ, counts in label_counts(check.corpus).items():
            if typ not in known:
                check.add(None, f"label {typ!r} ({counts['entities']} entities) never occurs in the "
                                "training file: the model cannot predict it", WARNING)
