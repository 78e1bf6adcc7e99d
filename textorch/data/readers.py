"""Readers for labelled CoNLL and GROBID files and for plain text to tag.

Every problem in an input file is a DataError located at ``path:line`` so that the user can open
the file there; nothing in a file can cause a traceback. Labels are converted to IOB2 on reading
(see tags.py), so the rest of the library never meets another scheme.

Fields are separated by runs of spaces or tabs. Other Unicode spaces (no-break space and the
like) are left inside tokens: they occur in real text and splitting on them would shift columns.
A line that is empty or made of whitespace only ends the current sequence.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from pathlib import Path

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.tags import (
    conll_tag_error,
    detect_scheme,
    grobid_label_error,
    grobid_to_iob2,
    is_conll_tag,
    is_grobid_label,
    normalize_to_iob2,
)
from textorch.data.tokenize import tokenize
from textorch.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

LABELLED_FORMATS = ("conll", "grobid")
_CONLL_COLUMNS = (2, 3, 4)
_SCHEME_RANK = {"iob2": 0, "iob1": 1, "iobes": 2}
_DETECT_LINES = 20


def read_file_bytes(path: str | Path) -> bytes:
    """The raw content of a file, gunzipped for ``.gz``; every failure a DataError naming it.

    Kept apart from decoding so that the validator (validate.py) can decode line by line and
    report every undecodable line instead of stopping at the first.
    """
    file = Path(path)
    try:
        if not file.exists():
            raise DataError(path, None, "file not found")
        if not file.is_file():
            raise DataError(path, None, "not a regular file")
        if file.name.endswith(".gz"):
            with gzip.open(file, "rb") as handle:
                return handle.read()
        return file.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        # strerror avoids repeating the (possibly very long) path inside the message
        reason = getattr(exc, "strerror", None) or exc
        raise DataError(path, None, f"cannot read file: {reason}") from None


def decode_utf8(data: bytes, path: str | Path) -> str:
    """File bytes as text: UTF-8 checked, BOM dropped, CRLF made LF.

    Decoding everything at once and splitting in memory is several times faster than iterating
    over a file object, and a decoding error can still be placed on its line by counting the
    newlines before the offending byte.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, message = locate_utf8_error(data, exc)
        raise DataError(path, line, message) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return text


def locate_utf8_error(data: bytes, exc: UnicodeDecodeError) -> tuple[int, str]:
    """The 1-based line of a decoding error in ``data`` and a message giving byte and column."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return line, f"invalid UTF-8 (byte 0x{data[exc.start]:02x} at column {column})"


def read_file_text(path: str | Path) -> str:
    """Whole file as text (see read_file_bytes and decode_utf8)."""
    return decode_utf8(read_file_bytes(path), path)


def _is_blank(line: str) -> bool:
    """A sequence boundary: empty, or whitespace only (GROBID files end sequences with ``" "``)."""
    return not line or line.isspace()


def _fields(line: str) -> list[str]:
    """Split a line on runs of spaces or tabs; the common single-space case stays cheap."""
    if "\t" in line:
        line = line.replace("\t", " ")
    fields = line.split(" ")
    if "" in fields:
        fields = [field for field in fields if field]
    return fields


def _is_document_marker(fields: list[str]) -> bool:
    """``-DOCSTART-`` and ``#begin document`` / ``#end document`` lines separate documents."""
    first = fields[0]
    if first == "-DOCSTART-":
        return True
    return first in ("#begin", "#end") and len(fields) > 1 and fields[1] == "document"


def _check_conll_columns(path: str | Path, lineno: int, found: int, expected: int,
                         first_line: int, labelled: bool = True) -> int:
    """Fix the file's column count on its first token line and hold every later line to it."""
    if expected == 0:
        if not labelled and found == 1:
            return found
        if found not in _CONLL_COLUMNS:
            raise DataError(path, lineno, f"expected 2 to 4 columns (token ... tag), found {found}")
        return found
    if found != expected:
        message = f"expected {expected} columns (as on line {first_line}), found {found}"
        raise DataError(path, lineno, message)
    return expected


def _parse_conll(text: str, path: str | Path, labelled: bool = True) -> Corpus:
    """Build a CoNLL corpus from file text; see read_conll for the accepted layout."""
    sequences: list[TokenSequence] = []
    doc_starts: list[int] = []
    tokens: list[str] = []
    tags: list[str] = []
    valid_tags: set[str] = set()
    columns = 0
    columns_line = 0
    first_line = 0
    scheme = "iob2"

    def flush() -> None:
        nonlocal tokens, tags, scheme
        if tokens:
            found = detect_scheme(tags)
            if _SCHEME_RANK[found] > _SCHEME_RANK[scheme]:
                scheme = found
            labels = normalize_to_iob2(tags) if tags else None
            sequences.append(TokenSequence(tokens, labels, line=first_line))
            tokens, tags = [], []

    for lineno, line in enumerate(text.split("\n"), 1):
        if _is_blank(line):
            flush()
            continue
        fields = _fields(line)
        if _is_document_marker(fields):
            flush()
            if fields[0] != "#end":
                doc_starts.append(len(sequences))
            continue
        if columns == 0:
            columns_line = lineno
        columns = _check_conll_columns(path, lineno, len(fields), columns, columns_line, labelled)
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
    flush()
    extra = {"columns": columns, "scheme": scheme, "doc_starts": doc_starts}
    return Corpus(sequences, "conll", path=str(path), n_features=0, extra=extra)


def read_conll(path: str | Path, labelled: bool = True) -> Corpus:
    """Read a CoNLL file (2, 3 or 4 columns: token first, tag last) with tags made IOB2.

    IOB1 (the original CoNLL-2003 files), IOB2 and IOBES are all accepted without being told
    which: the conversion is the same for the three. The scheme found is kept in
    ``corpus.extra["scheme"]``, the column count in ``extra["columns"]``, and the index of the
    first sequence of each document in ``extra["doc_starts"]``. With ``labelled=False`` (input
    to tag) a file of tokens alone, one column, is accepted too.
    """
    corpus = _parse_conll(read_file_text(path), path, labelled)
    logger.debug("read %d sequences from %s", len(corpus), path)
    return corpus


def _grobid_layout(path: str | Path, lineno: int, count: int, labelled: bool,
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


def _parse_grobid(text: str, path: str | Path, labelled: bool, n_features: int | None) -> Corpus:
    """Build a GROBID corpus from file text; see read_grobid for the accepted layout."""
    sequences: list[TokenSequence] = []
    tokens: list[str] = []
    features: list[list[str]] = []
    labels: list[str] = []
    valid_labels: set[str] = set()
    expected = 0
    expected_line = 0
    has_label = labelled
    n_feat = n_features if n_features is not None else 0
    widths: set[int] = set()
    first_line = 0

    def flush() -> None:
        nonlocal tokens, features, labels, expected
        if tokens:
            iob2 = grobid_to_iob2(labels) if has_label else None
            sequences.append(TokenSequence(tokens, iob2, features=features, line=first_line))
            widths.add(n_feat)
            tokens, features, labels = [], [], []
        if ragged:
            expected = 0

    # Labelled files may change their number of feature columns between sequences (GROBID's own
    # training files do, DeLFT trains on them); within a sequence the count is fixed. Input to tag
    # keeps one layout for the whole file, the model's.
    ragged = labelled and n_features is None
    for lineno, line in enumerate(text.split("\n"), 1):
        if _is_blank(line):
            flush()
            continue
        fields = _fields(line)
        if expected == 0:
            has_label, n_feat = _grobid_layout(path, lineno, len(fields), labelled, n_features)
            expected, expected_line = len(fields), lineno
        elif len(fields) != expected:
            found = len(fields)
            message = f"expected {expected} fields (as on line {expected_line}), found {found}"
            raise DataError(path, lineno, message)
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
        features.append(fields[1:1 + n_feat])
    flush()
    if widths:  # the widest layout; extra["common_features"]: the columns every sequence has
        n_feat = max(widths)
    extra = {"fields": n_feat + 1 + has_label, "labelled": has_label, "common_features": min(widths, default=n_feat)}
    return Corpus(sequences, "grobid", path=str(path), n_features=n_feat, extra=extra)


def read_grobid(path: str | Path, labelled: bool = True, n_features: int | None = None) -> Corpus:
    """Read a GROBID feature matrix: token, feature columns, then (when labelled) the label.

    Labels are converted to IOB2 with grobid_to_iob2; a ``<x>`` that does not continue an ``x``
    field is tolerated (it opens one), but a label of any other shape is an error. For tagging
    (``labelled=False``) pass the model's ``n_features``: a trailing gold label column is then
    recognised and kept in ``labels`` without being mistaken for a feature.
    """
    corpus = _parse_grobid(read_file_text(path), path, labelled, n_features)
    logger.debug("read %d sequences from %s", len(corpus), path)
    return corpus


def read_text(path: str | Path) -> Corpus:
    """Read one text per line, tokenised with offsets, for tagging.

    Empty lines are kept as empty sequences so that output line ``n`` answers input line ``n``.
    """
    text = read_file_text(path)
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    sequences = []
    for lineno, line in enumerate(lines, 1):
        tokens, offsets = tokenize(line)
        sequences.append(TokenSequence(tokens, offsets=offsets, text=line, line=lineno))
    return Corpus(sequences, "text", path=str(path))


def _label_kind(label: str) -> str | None:
    """``grobid``, ``conll`` or None, for one label; brackets decide, since ``I-<x>`` fits both."""
    if is_grobid_label(label):
        return "grobid"
    if is_conll_tag(label):
        return "conll"
    return None


def _detect(text: str, path: str | Path) -> str:
    """Decide the format from the labels of the first token lines; they must all agree."""
    found: str | None = None
    found_line = 0
    seen = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        if _is_blank(line):
            continue
        fields = _fields(line)
        if _is_document_marker(fields):
            continue
        kind = _label_kind(fields[-1]) if len(fields) > 1 else None
        if kind is None:
            message = (f"cannot detect the format: {fields[-1]!r} is neither a CoNLL tag "
                       "(O, B-X, I-X, E-X, S-X) nor a GROBID label (I-<x>, <x>)")
            raise DataError(path, lineno, message)
        if found is None:
            found, found_line = kind, lineno
        elif kind != found:
            message = (f"cannot detect the format: line {found_line} has a {found} label but "
                       f"this line has a {kind} one ({fields[-1]!r})")
            raise DataError(path, lineno, message)
        seen += 1
        if seen >= _DETECT_LINES:
            break
    if found is None:
        raise DataError(path, None, "cannot detect the format: no token lines")
    return found


def detect_format(path: str | Path) -> str:
    """Tell a labelled CoNLL file from a GROBID one by the shape of its labels."""
    return _detect(read_file_text(path), path)


def read_labelled(path: str | Path, format: str | None = None) -> Corpus:
    """Read a labelled file in ``format`` (``conll`` or ``grobid``), detected when None.

    The file is read once even when the format has to be detected.
    """
    if format is not None and format not in LABELLED_FORMATS:
        choices = ", ".join(repr(name) for name in LABELLED_FORMATS)
        raise ConfigError(f"unknown format {format!r}: choose one of {choices} "
                          "(or none, to detect it)")
    corpus = parse_labelled_text(read_file_text(path), path, format)
    logger.debug("read %d %s sequences from %s", len(corpus), corpus.format, path)
    return corpus


def parse_labelled_text(text: str, path: str | Path, format: str | None = None) -> Corpus:
    """Parse labelled file text already in memory (see read_labelled; ``format`` is trusted).

    The validator uses it to build a corpus from a file whose bad sequences it blanked out, so
    that line numbers stay those of the file.
    """
    chosen = format or _detect(text, path)
    if chosen == "conll":
        return _parse_conll(text, path)
    return _parse_grobid(text, path, labelled=True, n_features=None)


# The per-line rules, public so that validate.py applies exactly the reader's rules when it
# collects every problem of a file instead of stopping at the first.
is_blank = _is_blank
split_fields = _fields
is_document_marker = _is_document_marker
label_kind = _label_kind
CONLL_COLUMNS = _CONLL_COLUMNS
