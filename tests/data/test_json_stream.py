"""The streamed JSON answer: the same text as ``json.dumps(..., ensure_ascii=False, indent=2)``,
record by record, without leaving reference cycles behind (a run with the collector paused keeps flat memory)."""

from __future__ import annotations

import gc
import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from textorch.data.json_stream import JsonListWriter, indented

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                       max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.sampled_from(["", "  ", "    "]))
def test_indented_is_jsons_indent_2(value: object, indent: str) -> None:
    assert indented(value, indent) == json.dumps(value, ensure_ascii=False, indent=2).replace("\n", "\n" + indent)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.text(), _VALUES, max_size=3), max_size=5))
def test_a_list_written_record_by_record_is_the_whole_document(records: list[dict]) -> None:
    header = {"software": "textorch", "runtime": 1.5}
    body = io.StringIO()
    writer = JsonListWriter(body, "texts")
    for record in records:
        writer.add(record)
    writer.header = header
    assert writer.head() + body.getvalue() + writer.tail() == json.dumps({**header, "texts": records}, ensure_ascii=False, indent=2) + "\n"


def test_writing_records_leaves_no_cycles_for_the_collector() -> None:
    record = {"text": "Mary lives in Rome", "entities": [{"text": "Mary", "class": "PER", "score": 0.91, "beginOffset": 0}]}
    writer = JsonListWriter(io.StringIO(), "texts")
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(200):
            writer.add(record)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()
