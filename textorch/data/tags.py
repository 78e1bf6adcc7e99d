"""Tag-scheme conversion: every reader turns its file's labels into IOB2, every writer back.

Training, decoding and metrics only ever see IOB2 (``B-X``, ``I-X``, ``O``), so the schemes found
in the wild (IOB1 of the original CoNLL-2003 files, IOB2, IOBES, GROBID's own convention) are
handled here and nowhere else.

GROBID's convention: ``I-<x>`` opens a field, ``<x>`` continues it, and ``<other>`` /
``I-<other>`` mark tokens outside any field. The angle brackets are kept inside the IOB2 type
(``I-<x>`` becomes ``B-<x>``), as DeLFT does, so that the label inventory of a model trained on a
GROBID file reads the same as the file.
"""

from __future__ import annotations

import re

OUTSIDE = "O"
CONLL_PREFIXES = ("B-", "I-", "E-", "S-")
GROBID_OTHER_SUFFIX = "other>"

_GROBID_LABEL = re.compile(r"(?:I-)?<[^<>\s]+>")


def split_tag(tag: str) -> tuple[str, str]:
    """Split ``B-PER`` into ``("B", "PER")``; ``O`` gives ``("O", "")``.

    Callers compare prefixes and types separately (does this ``I-`` continue the same type?),
    which is clearer than slicing strings at every call site.
    """
    if tag == OUTSIDE:
        return OUTSIDE, ""
    return tag[0], tag[2:]


def conll_tag_error(tag: str) -> str | None:
    """Why ``tag`` fits none of IOB1, IOB2 or IOBES, or None when it fits.

    Returns a message rather than raising so that a reader can wrap it into a DataError that
    names the file and line, which only the reader knows.
    """
    if tag == OUTSIDE:
        return None
    if len(tag) > 2 and tag[:2] in CONLL_PREFIXES:
        return None
    return f"invalid tag {tag!r}: expected O or B-X, I-X, E-X, S-X (IOB1, IOB2 or IOBES)"


def grobid_label_error(label: str) -> str | None:
    """Why ``label`` is not a GROBID label (``I-<x>`` or ``<x>``), or None when it is."""
    if _GROBID_LABEL.fullmatch(label):
        return None
    return f"invalid GROBID label {label!r}: expected I-<field> or <field>"


def is_grobid_label(label: str) -> bool:
    """True for ``I-<x>`` / ``<x>``; used to tell GROBID files from CoNLL files."""
    return _GROBID_LABEL.fullmatch(label) is not None


def is_conll_tag(tag: str) -> bool:
    """True for ``O`` and any ``B-/I-/E-/S-`` tag; used to tell CoNLL files from GROBID files."""
    return conll_tag_error(tag) is None


def validate_label(label: str, scheme: str) -> str | None:
    """Check ``label`` against ``scheme`` (``conll`` or ``grobid``); None when valid.

    One entry point lets callers choose the scheme from a format name instead of branching.
    """
    if scheme == "conll":
        return conll_tag_error(label)
    if scheme == "grobid":
        return grobid_label_error(label)
    raise ValueError(f"unknown tag scheme {scheme!r}: expected 'conll' or 'grobid'")


def detect_scheme(tags: list[str]) -> str:
    """Name the scheme a tag list was written in: ``iobes``, ``iob1`` or ``iob2``.

    Only informative (normalisation does not need it): it lets a corpus record what its file
    used. ``E-``/``S-`` mean IOBES; an ``I-X`` that opens an entity means IOB1; otherwise IOB2.
    """
    previous_type = ""
    iob1 = False
    for tag in tags:
        if tag == OUTSIDE:
            previous_type = ""
            continue
        prefix, typ = tag[0], tag[2:]
        if prefix in "ES":
            return "iobes"
        if prefix == "I" and typ != previous_type:
            iob1 = True
        previous_type = typ
    return "iob1" if iob1 else "iob2"


def normalize_to_iob2(tags: list[str]) -> list[str]:
    """Rewrite one sequence's IOB1, IOB2 or IOBES tags as IOB2.

    The three schemes differ only in how an entity's first and last tokens are marked, so one
    pass covers them all: ``S-``/``E-`` lose their boundary role (``B-``/``I-``), and an ``I-X``
    that does not continue an ``X`` entity must open one. IOB1's ``B-X`` (an ``X`` directly after
    another ``X``) is already IOB2's meaning of ``B-X``. Tags must be valid (see conll_tag_error).
    """
    out: list[str] = []
    previous_type = ""
    for tag in tags:
        if tag == OUTSIDE:
            out.append(tag)
            previous_type = ""
            continue
        prefix, typ = tag[0], tag[2:]
        if prefix == "S":
            prefix = "B"
        elif prefix == "E":
            prefix = "I"
        if prefix == "I" and typ != previous_type:
            prefix = "B"
        out.append(tag if tag[0] == prefix else f"{prefix}-{typ}")
        previous_type = typ
    return out


def iob2_forbidden(labels: list[str]) -> tuple[list[list[bool]], list[bool]]:
    """The moves IOB2 rules out among ``labels``: ``forbidden[i][j]`` when label ``j`` cannot
    follow label ``i`` (an ``I-X`` after anything but ``B-X`` or ``I-X``), and ``at_start[j]``
    when ``j`` cannot open a sequence (every ``I-X``). Other labels may follow anything."""
    def continues(previous: str, tag: str) -> bool:
        return previous[:2] in ("B-", "I-") and previous[2:] == tag[2:]

    forbidden = [[tag.startswith("I-") and not continues(previous, tag) for tag in labels] for previous in labels]
    return forbidden, [tag.startswith("I-") for tag in labels]


def iob2_to_iobes(tags: list[str]) -> list[str]:
    """Rewrite valid IOB2 tags as IOBES, for tools and users that want explicit entity ends."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        if tag == OUTSIDE:
            out.append(tag)
            continue
        prefix, typ = tag[0], tag[2:]
        following = tags[i + 1] if i + 1 < len(tags) else OUTSIDE
        continues = following == f"I-{typ}"
        if prefix == "B":
            out.append(tag if continues else f"S-{typ}")
        else:
            out.append(tag if continues else f"E-{typ}")
    return out


def grobid_to_iob2(labels: list[str]) -> list[str]:
    """Rewrite GROBID labels as IOB2, exactly as DeLFT's reader does, token by token.

    The rule is local (no look-behind): a ``<x>`` that does not follow an ``x`` token simply
    becomes ``I-<x>``, which IOB2-aware code treats as opening an entity anyway.
    """
    out: list[str] = []
    for label in labels:
        if label.endswith(GROBID_OTHER_SUFFIX):
            out.append(OUTSIDE)
        elif label.startswith("I-"):
            out.append("B-" + label[2:])
        elif label.startswith("<"):
            out.append("I-" + label)
        else:
            out.append(label)
    return out


def _bracketed(typ: str) -> str:
    """GROBID types carry angle brackets; add them to a bare type (a CoNLL-trained model's)."""
    if typ.startswith("<") and typ.endswith(">"):
        return typ
    return f"<{typ}>"


GROBID_CACHE_SIZE = 4096
"""``(previous tag, tag)`` pairs whose GROBID label :func:`iob2_to_grobid` keeps (a model has a
few dozen tags, so a few hundred pairs)."""

_grobid_of_pair: dict[tuple[str | None, str], str] = {}


def iob2_to_grobid(tags: list[str]) -> list[str]:
    """Rewrite IOB2 tags in GROBID's convention, the inverse of grobid_to_iob2.

    IOB2 has a single ``O``, so a run of outside tokens is written as GROBID itself writes one:
    ``I-<other>`` first, then ``<other>``. A GROBID file that opens a new ``I-<other>`` run right
    after another one therefore comes back with ``<other>`` there: that distinction is lost on
    reading and cannot be recovered from the tags alone.

    A token's label depends on its tag and the tag before it alone (None before the first), so
    the label of each pair is worked out once and kept: rewriting a file's tags is then one
    dictionary look-up per token, done by C code.
    """
    try:
        return list(map(_grobid_of_pair.__getitem__, zip([None, *tags], tags)))
    except KeyError:  # a pair not met yet: worked out here, the answer not read back from the table
        labels = [_grobid_label(previous, tag) for previous, tag in zip([None, *tags], tags)]
        if len(_grobid_of_pair) > GROBID_CACHE_SIZE:
            _grobid_of_pair.clear()
        _grobid_of_pair.update(zip(zip([None, *tags], tags), labels))
        return labels


def _grobid_label(previous: str | None, tag: str) -> str:
    """The GROBID label of ``tag`` after ``previous`` (None: the first token of a sequence)."""
    if tag == OUTSIDE:
        return "<other>" if previous == OUTSIDE else "I-<other>"
    same_field = tag[0] == "I" and previous is not None and previous != OUTSIDE and previous[2:] == tag[2:]
    typ = _bracketed(tag[2:])
    return typ if same_field else f"I-{typ}"
