"""A JSON answer written record by record, byte for byte what ``json.dumps(document,
ensure_ascii=False, indent=2) + "\\n"`` gives for the whole document.

The answers of ``seq tag``, ``grobid MODEL tag`` and ``cls classify`` are one object: header
fields, then one list holding a record per input. Streaming writes each record as it is
tagged, indented as it would sit in the list; the header is produced at the end, when the run
time is known (see :mod:`textorch.data.staged_output`, which puts it in front). On stdout the
header cannot wait: it is written first without ``runtime``, which then follows the list.
"""

from __future__ import annotations

import json
from typing import TextIO

_INDENT = 2
_RECORD_INDENT = " " * (2 * _INDENT)  # records sit at depth 2: document, then list


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=_INDENT)


_encode_flat = json.JSONEncoder(ensure_ascii=False).encode
"""Scalars (and the odd key that is not a string) through the C encoder."""


def indented(value: object, indent: str = "") -> str:
    """``json.dumps(value, ensure_ascii=False, indent=2)`` with every line after the first
    prefixed by ``indent``, the same text, made without reference cycles.

    json's indenting encoder is pure Python and builds its nested functions anew on each call,
    mutually referring closures that only the cyclic collector frees: a call per record leaves
    it work per record, and a run with the collector paused would keep them all. Scalars go
    through the C encoder, so strings and numbers are written exactly as json writes them.
    """
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + " " * _INDENT
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                return _dumps(value).replace("\n", "\n" + indent)
            items.append(inner + _encode_flat(key) + ": " + indented(item, inner))
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = indent + " " * _INDENT
        return "[\n" + ",\n".join(inner + indented(item, inner) for item in value) + "\n" + indent + "]"
    return _encode_flat(value)


def document_head(header: dict, list_key: str) -> str:
    """The document's text up to and excluding the list's opening bracket."""
    text = _dumps({**header, list_key: []})
    closing = "[]\n}"
    assert text.endswith(closing)
    return text[: -len(closing)]


class JsonListWriter:
    """Records of ``list_key`` written to ``out`` as they come; ``head``/``tail`` close the document.

    ``header_first`` (stdout): the header, ``runtime`` aside, is written at once and
    ``runtime`` goes after the list; otherwise :meth:`head` gives the whole header at the end.
    """

    def __init__(self, out: TextIO, list_key: str, header_first: dict | None = None) -> None:
        self.out = out
        self.list_key = list_key
        self.count = 0
        self.header: dict = {}
        """The header fields for :meth:`head`; the caller sets ``runtime`` before the end."""
        self._streamed_header = header_first is not None
        if header_first is not None:
            out.write(document_head({k: v for k, v in header_first.items() if k != "runtime"}, list_key) + "[")
            self.header = dict(header_first)

    def add(self, record: dict) -> None:
        if self.count:
            opening = ","
        else:  # the bracket opens the list here unless the header went out with it
            opening = "" if self._streamed_header else "["
        self.out.write(opening + "\n" + _RECORD_INDENT + indented(record, _RECORD_INDENT))
        self.count += 1

    def head(self, failed: bool = False) -> str:
        return "" if self._streamed_header else document_head(self.header, self.list_key)

    def tail(self, failed: bool = False) -> str:
        if self._streamed_header:
            closed = "]" if self.count == 0 else "\n" + " " * _INDENT + "]"
            runtime = self.header.get("runtime")
            return closed + (f',\n  "runtime": {json.dumps(runtime)}' if runtime is not None else "") + "\n}\n"
        closed = "[]" if self.count == 0 else "\n" + " " * _INDENT + "]"
        return closed + "\n}\n"
