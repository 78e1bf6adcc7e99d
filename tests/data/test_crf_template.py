"""CRF++ templates: the syntax GROBID's template files use, and the template generated from columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from textorch.data.crf_template import (
    check_columns,
    generated_template,
    parse_template,
    read_template,
    template_text,
)
from textorch.errors import DataError

GROBID_STYLE = """# Token
U00:%x[-3,0]
U07:%x[-1,0]/%x[0,0]

# Capitalization
U53:%x[0,11]/%x[1,11]
U99:prefix-%x[ 2 , 4 ]
#U63:%x[0,12]/%x[1,12]

B
"""


def test_unigram_lines_become_cells_in_order_and_comments_and_b_lines_are_skipped() -> None:
    templates = parse_template(GROBID_STYLE)
    assert [t.name for t in templates] == ["U00", "U07", "U53", "U99"]
    assert [t.cells for t in templates] == [((-3, 0),), ((-1, 0), (0, 0)), ((0, 11), (1, 11)), ((2, 4),)]
    assert templates[1].text == "%x/%x"
    assert templates[3].text == "prefix-%x"  # literal characters are part of the feature
    assert templates[2].columns == {11}


def test_text_round_trips() -> None:
    templates = parse_template(GROBID_STYLE)
    assert parse_template(template_text(templates)) == templates


@pytest.mark.parametrize("text, line, fragment", [
    ("U00:%x[0,0]\nX01:%x[0,1]\n", 2, "not a CRF++ template line"),
    ("U00:%x[0,0]\nU01:token\n", 2, "reads no cell"),
    ("U00:%x[0,0]\nU00:%x[0,1]\n", 2, "used twice"),
    ("U00:%x[0,0]\nB01:%x[0,0]\n", 2, "bigram templates over input cells"),
    ("# only comments\nB\n", None, "no unigram template"),
])
def test_errors_name_the_file_and_line(text: str, line: int | None, fragment: str) -> None:
    with pytest.raises(DataError) as caught:
        parse_template(text, "model.crf-template")
    assert caught.value.path == "model.crf-template"
    assert caught.value.line == line
    assert fragment in str(caught.value)


def test_read_template_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read the CRF\\+\\+ template"):
        read_template(tmp_path / "absent.crf-template")


def test_a_column_the_data_lacks_is_refused() -> None:
    templates = parse_template("U00:%x[0,0]\nU01:%x[0,5]\n")
    check_columns(templates, 6, "t")  # token + 5 features: column 5 exists
    with pytest.raises(DataError, match="reads column 5, but the data has columns 0-4"):
        check_columns(templates, 5, "t")


def test_generated_template_reads_narrow_columns_further_than_wide_ones() -> None:
    templates = generated_template([5000, 4000, 3])  # the token, a lexical column, a layout column
    by_column: dict[int, set[tuple]] = {}
    for t in templates:
        by_column.setdefault(t.cells[0][1], set()).add(t.cells)
    assert ((-2, 0),) in by_column[0] and ((-1, 0), (0, 0)) in by_column[0]  # the token: wide window, pairs
    assert ((-2, 1),) not in by_column[1] and ((1, 1),) in by_column[1]  # a wide column: -1..1 only
    assert ((2, 2),) in by_column[2] and ((0, 2), (1, 2)) in by_column[2]
    assert len({t.name for t in templates}) == len(templates)
    assert parse_template(template_text(templates)) == templates
