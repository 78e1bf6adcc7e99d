"""The CoNLL and GROBID line parsers, as generators of sequences over numbered lines.

One parser serves both ways of reading: :mod:`textorch.data.readers` feeds it a whole file's
lines and keeps every sequence (training, evaluation), :mod:`textorch.data.streams` feeds it a
file block by block and hands each sequence on as soon as its closing blank line is read
(tagging a file of any size in constant memory). Either way the rules, the errors
(``DataError(path, line, message)``) and the sequences are the same.

What a whole-file reader reports about the file (scheme, column count, document starts, the
widest feature layout) accumulates on the parser object while it runs: :meth:`extra` is
complete once the generator is exhausted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from textorch.data.corpus import TokenSequence
from textorch.data.tags import conll_tag_error, detect_scheme, grobid_label_error, grobid_to_iob2, normalize_to_iob2
from textorch.errors import DataError

CONLL_COLUMNS = (2, 3, 4)
_SCHEME_RANK = {"iob2": 0, "iob1": 1, "iobes": 2}

SPLIT_LINES_KEPT = 16384
"""Distinct lines whose fields a parser keeps (a few tens of MB at most), emptied when full."""
SHARED_VALUES_KEPT = 1 << 20
"""Distinct field values a GROBID parser hands out as one string object each (emptied when
full): a feature matrix repeats few values (layout flags, prefixes, lexicon answers) over
millions of fields, and a string object per field is most of a read corpus's memory, where a
pointer to a shared value is eight bytes."""

NumberedLines = Iterable[tuple[int, str]]
"""``(1-based line number, line without its newline)`` pairs, in file order."""


def is_blank(line: str) -> bool:
    """A sequence boundary: empty, or whitespace only (GROBID files end sequences with ``" "``)."""
    return not line or line.isspace()


def split_fields(line: str) -> list[str]:
    """Split a line on runs of spaces or tabs; the common single-space case stays cheap."""
    if "\t" in line:
        line = line.replace("\t", " ")
    fields = line.split(" ")
    if "" in fields:
        fields = [field for field in fields if field]
    return fields


def is_document_marker(fields: list[str]) -> bool:
    """``-DOCSTART-`` and ``#begin document`` / ``#end document`` lines separate documents."""
    first = fields[0]
    if first == "-DOCSTART-":
        return True
    return first in ("#begin", "#end") and len(fields) > 1 and fields[1] == "document"


def check_conll_columns(path: str | Path, lineno: int, found: int, expected: int,
                        first_line: int, labelled: bool = True) -> int:
    """Fix the file's column count on its first token line and hold every later line to it."""
    if expected == 0:
        if not labelled and found == 1:
            return found
        if found not in CONLL_COLUMNS:
            raise DataError(path, lineno, f"expected 2 to 4 columns (token ... tag), found {found}")
        return found
    if found != expected:
        message = f"expected {expected} columns (as on line {first_line}), found {found}"
        raise DataError(path, lineno, message)
    return expected


class ConllParser:
    """CoNLL lines (2, 3 or 4 columns, token first and tag last) to sequences labelled in IOB2.

    With ``labelled=False`` (input to tag) a file of tokens alone, one column, is accepted too.
    """

    def __init__(self, path: str | Path, labelled: bool = True) -> None:
        self.path = path
        self.labelled = labelled
        self.columns = 0
        self.scheme = "iob2"
        self.doc_starts: list[int] = []
        self.n_sequences = 0

    def extra(self) -> dict:
        """``Corpus.extra`` of the file read so far: column count, scheme, document starts."""
        return {"columns": self.columns, "scheme": self.scheme, "doc_starts": self.doc_starts}

    def sequences(self, lines: NumberedLines) -> Iterator[TokenSequence]:
        path, labelled = self.path, self.labelled
        tokens: list[str] = []
        tags: list[str] = []
        valid_tags: set[str] = set()
        columns = self.columns
        columns_line = 0
        first_line = 0
        for lineno, line in lines:
            if is_blank(line):
                if tokens:
                    yield self._sequence(tokens, tags, first_line)
                    tokens, tags = [], []
                continue
            fields = split_fields(line)
            if is_document_marker(fields):
                if tokens:
                    yield self._sequence(tokens, tags, first_line)
                    tokens, tags = [], []
                if fields[0] != "#end":
                    self.doc_starts.append(self.n_sequences)
                continue
            if columns == 0:
                columns_line = lineno
            columns = self.columns = check_conll_columns(path, lineno, len(fields), columns, columns_line, labelled)
            if not tokens:
                first_line = lineno
            tokens.append(fields[0])
            if columns == 1:
                continue
            tag = fields[-1]
            if tag not in valid_tags:
                error = conll_tag_error(tag)
                if error is not None:
                    raise DataError(path, lineno, error)
                valid_tags.add(tag)
            tags.append(tag)
        if tokens:
            yield self._sequence(tokens, tags, first_line)

    def _sequence(self, tokens: list[str], tags: list[str], first_line: int) -> TokenSequence:
        found = detect_scheme(tags)
        if _SCHEME_RANK[found] > _SCHEME_RANK[self.scheme]:
            self.scheme = found
        self.n_sequences += 1
        return TokenSequence(tokens, normalize_to_iob2(tags) if tags else None, line=first_line)


def grobid_layout(path: str | Path, lineno: int, count: int, labelled: bool,
                  n_features: int | None) -> tuple[bool, int]:
    """From the first line's field count, decide whether a label is present and how many features.

    Returns ``(has_label, n_features)``. When the caller knows the model's feature count, an
    unlabelled read accepts files with or without a gold label column; any other count is a
    mismatch with the model and is reported here rather than as garbage features later.
    """
    if labelled:
        if n_features is not None and count != n_features + 2:
            message = (f"expected {n_features + 2} fields (token, {n_features} features, label), "
                       f"found {count}")
            raise DataError(path, lineno, message)
        if count < 2:
            message = f"expected at least 2 fields (token and label), found {count}"
            raise DataError(path, lineno, message)
        return True, count - 2
    if n_features is None:
        return False, count - 1
    if count == n_features + 2:
        return True, n_features
    if count == n_features + 1:
        return False, n_features
    message = (f"expected {n_features + 1} fields (token and {n_features} features) or "
               f"{n_features + 2} (with a label), found {count}")
    raise DataError(path, lineno, message)


class GrobidParser:
    """GROBID feature lines (token, feature columns, then the label when labelled) to sequences.

    Labelled files may change their number of feature columns between sequences (GROBID's own
    training files do, DeLFT trains on them); within a sequence the count is fixed. Input to tag
    (``labelled=False`` with the model's ``n_features``) keeps one layout for the whole file,
    the model's, and a trailing gold label column is recognised and kept in ``labels``.
    """

    def __init__(self, path: str | Path, labelled: bool = True, n_features: int | None = None) -> None:
        self.path = path
        self.labelled = labelled
        self.n_features = n_features
        self.has_label = labelled
        self.n_feat = n_features if n_features is not None else 0
        self.widths: set[int] = set()
        self.fixed: tuple[int, int] = (0, 0)
        """The field count every line must have and the line that set it; (0, 0): the first
        token line sets it."""

    def fix_layout(self, has_label: bool, n_features: int, width: int, line: int) -> None:
        """Hold every line to the layout an earlier part of the same file set (``width`` fields,
        as on ``line``): for parsing a file's later part alone (:mod:`textorch.data.row_chunks`)."""
        self.has_label, self.n_feat = has_label, n_features
        self.fixed = (width, line)

    def extra(self) -> tuple[int, dict]:
        """The widest feature layout of the file read so far and ``Corpus.extra``."""
        n_feat = max(self.widths) if self.widths else self.n_feat
        extra = {"fields": n_feat + 1 + self.has_label, "labelled": self.has_label,
                 "common_features": min(self.widths, default=n_feat)}
        return n_feat, extra

    def sequences(self, lines: NumberedLines) -> Iterator[TokenSequence]:
        # The loop runs once per line of a file: blank lines are tested inline, and a line seen before
        # (GROBID files repeat a token with the same layout features) not split again. The
        # split fields are never changed; each token gets its own list of features.
        split_lines: dict[str, list[str]] | None = {}
        kept_since = 0
        shared: dict[str, str] = {}
        path, labelled, n_features = self.path, self.labelled, self.n_features
        tokens: list[str] = []
        features: list[list[str]] = []
        labels: list[str] = []
        valid_labels: set[str] = set()
        expected, expected_line = self.fixed
        first_line = 0
        ragged = labelled and n_features is None
        has_label, stop = self.has_label, 1 + self.n_feat
        for lineno, line in lines:
            if not line or line.isspace():
                if tokens:
                    yield self._sequence(tokens, features, labels, first_line)
                    tokens, features, labels = [], [], []
                if ragged:
                    expected = 0
                continue
            fields = split_lines.get(line) if split_lines is not None else None
            if fields is None:
                if len(shared) >= SHARED_VALUES_KEPT:
                    shared = {}
                split = split_fields(line)
                fields = list(map(shared.setdefault, split, split))
                if split_lines is not None:
                    if len(split_lines) >= SPLIT_LINES_KEPT:
                        # Full: kept if lines repeated at least once on average, else dropped.
                        split_lines = {} if lineno - kept_since >= 2 * SPLIT_LINES_KEPT else None
                        kept_since = lineno
                    if split_lines is not None:
                        split_lines[line] = fields
            if len(fields) != expected:
                if expected:
                    message = f"expected {expected} fields (as on line {expected_line}), found {len(fields)}"
                    raise DataError(path, lineno, message)
                self.has_label, self.n_feat = grobid_layout(path, lineno, len(fields), labelled, n_features)
                has_label, stop = self.has_label, 1 + self.n_feat
                expected, expected_line = len(fields), lineno
            if has_label:
                label = fields[-1]
                if label not in valid_labels:
                    error = grobid_label_error(label)
                    if error is not None:
                        raise DataError(path, lineno, error)
                    valid_labels.add(label)
                labels.append(label)
            if not tokens:
                first_line = lineno
            tokens.append(fields[0])
            features.append(fields[1:stop])
        if tokens:
            yield self._sequence(tokens, features, labels, first_line)

    def _sequence(self, tokens: list[str], features: list[list[str]], labels: list[str], first_line: int) -> TokenSequence:
        self.widths.add(self.n_feat)
        iob2 = grobid_to_iob2(labels) if self.has_label else None
        return TokenSequence(tokens, iob2, features=features, line=first_line)
