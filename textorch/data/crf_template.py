"""CRF++ feature templates: read from a template file, or generated from the data's columns.

GROBID trains its CRF models (Wapiti) from CRF++ template files. A line ``U07:%x[-1,0]/%x[0,0]``
defines a unigram feature: the values of column 0 at the previous and the current token, joined,
paired with each label. A line ``B`` asks for label bigrams, which a linear-chain CRF head has
anyway. textorch reads the same files so that a network can be given exactly the sparse features
GROBID's CRF sees (:mod:`textorch.data.template_features`), and generates a template from the
columns where the user has none.

Column 0 is the token, column ``k`` the ``k``-th feature column (the label is never a column a
template may read). A row offset past either end of the sequence reads a boundary value that
depends on how far past the end it is, as CRF++ does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from textorch.errors import DataError

_MACRO = re.compile(r"%x\[\s*(-?\d+)\s*,\s*(\d+)\s*\]")
_NAME = re.compile(r"^([UB][^:]*)(?::(.*))?$")


@dataclass(frozen=True)
class FeatureTemplate:
    """One unigram template: its name and the ``(row offset, column)`` cells it joins.

    ``text`` keeps any literal characters around the cells: two templates that read the same
    cells with different literals are different features, as in CRF++."""

    name: str
    cells: tuple[tuple[int, int], ...]
    text: str

    @property
    def columns(self) -> set[int]:
        return {column for _, column in self.cells}


def parse_template(text: str, source: str = "<template>") -> list[FeatureTemplate]:
    """The unigram templates of CRF++ template ``text`` (``source`` names it in errors).

    ``B`` lines add nothing here: the CRF head always has label transitions. A ``B`` line with
    cells (a bigram feature conditioned on the input) is refused rather than silently dropped.
    """
    templates: list[FeatureTemplate] = []
    names: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _NAME.match(line)
        if match is None:
            raise DataError(source, number, f"not a CRF++ template line (U... or B...): {line!r}")
        name, body = match.group(1), match.group(2) or ""
        cells = tuple((int(row), int(column)) for row, column in _MACRO.findall(body))
        if name.startswith("B"):
            if cells:
                raise DataError(source, number, "bigram templates over input cells (B...:%x[...]) are not supported; "
                                                "a plain 'B' line (label transitions) is always on")
            continue
        if not cells:
            raise DataError(source, number, f"unigram template {name!r} reads no cell (%x[row,column])")
        if name in names:
            raise DataError(source, number, f"template name {name!r} is used twice")
        names.add(name)
        templates.append(FeatureTemplate(name, cells, _MACRO.sub("%x", body)))
    if not templates:
        raise DataError(source, None, "no unigram template (U...) in this template file")
    return templates


def read_template(path: str | Path) -> list[FeatureTemplate]:
    """:func:`parse_template` of a file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise DataError(str(path), None, f"cannot read the CRF++ template: {error.strerror or error}") from None
    return parse_template(text, str(path))


def check_columns(templates: list[FeatureTemplate], n_columns: int, source: str) -> None:
    """Refuse templates reading a column the data does not have (``n_columns`` counts the token)."""
    for template in templates:
        bad = sorted(c for c in template.columns if c >= n_columns)
        if bad:
            raise DataError(source, None, f"template {template.name} reads column {bad[0]}, but the data has "
                                          f"columns 0-{n_columns - 1} (the token and {n_columns - 1} features)")


def generated_template(column_values: list[int], wide: int = 32) -> list[FeatureTemplate]:
    """A template for data without one, from the number of distinct values of each column.

    Column 0 (the token) and every column with at most ``wide`` values (layout, shape,
    punctuation flags: the columns whose neighbours carry the signal) are read at offsets -2..2
    with the pairs (-1, 0) and (0, 1); columns with more values (lower case, prefixes,
    suffixes, lexicon flags of large vocabularies) at -1..1. This is the shape of GROBID's own
    templates, chosen from the data rather than from a model's name.
    """
    templates: list[FeatureTemplate] = []
    for column, values in enumerate(column_values):
        narrow = column == 0 or values <= wide
        offsets = (-2, -1, 0, 1, 2) if narrow else (-1, 0, 1)
        cells: list[tuple[tuple[int, int], ...]] = [((row, column),) for row in offsets]
        if narrow:
            cells += [((-1, column), (0, column)), ((0, column), (1, column))]
        templates += [FeatureTemplate(f"U{column}.{k}", joined, "/".join(["%x"] * len(joined)))
                      for k, joined in enumerate(cells)]
    return templates


def template_text(templates: list[FeatureTemplate]) -> str:
    """CRF++ text for ``templates`` (saved with a model, read back by :func:`parse_template`)."""
    lines = []
    for template in templates:
        pieces = template.text.split("%x")
        cells = [f"%x[{row},{column}]" for row, column in template.cells]
        lines.append(f"{template.name}:" + "".join(p + c for p, c in zip(pieces, [*cells, ""])))
    return "\n".join(lines) + "\n"
