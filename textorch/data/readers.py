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
from collections.abc import Iterable
from pathlib import Path

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.sequence_parsers import (
    CONLL_COLUMNS,
    ConllParser,
    GrobidParser,
    is_blank,
    is_document_marker,
    split_fields,
)
from textorch.data.tags import is_conll_tag, is_grobid_label
from textorch.data.tokenize import tokenize
from textorch.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

LABELLED_FORMATS = ("conll", "grobid")
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


def _parse_conll(text: str, path: str | Path, labelled: bool = True) -> Corpus:
    """Build a CoNLL corpus from file text; see read_conll for the accepted layout."""
    parser = ConllParser(path, labelled)
    sequences = list(parser.sequences(enumerate(text.split("\n"), 1)))
    return Corpus(sequences, "conll", path=str(path), n_features=0, extra=parser.extra())


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


def _parse_grobid(text: str, path: str | Path, labelled: bool, n_features: int | None) -> Corpus:
    """Build a GROBID corpus from file text; see read_grobid for the accepted layout."""
    parser = GrobidParser(path, labelled, n_features)
    sequences = list(parser.sequences(enumerate(text.split("\n"), 1)))
    n_feat, extra = parser.extra()
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
    return detect_format_of_lines(enumerate(text.split("\n"), 1), path)


def detect_format_of_lines(lines: Iterable[tuple[int, str]], path: str | Path) -> str:
    """:func:`detect_format` over numbered lines (a file read lazily stops after the first few)."""
    found: str | None = None
    found_line = 0
    seen = 0
    for lineno, line in lines:
        if is_blank(line):
            continue
        fields = split_fields(line)
        if is_document_marker(fields):
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
# collects every problem of a file instead of stopping at the first (the others are
# sequence_parsers' own, imported above).
label_kind = _label_kind
__all__ = ["CONLL_COLUMNS", "is_blank", "is_document_marker", "split_fields"]
