"""The A/B and diagnostics benchmarks' own logic: the fast-path A/B switches each path off alone,
and the tagging-output comparison counts what differs.
"""

from __future__ import annotations

import dataclasses

from benchmarks.ab import fast_path_ab
from benchmarks.diagnostics import tagging_outputs

from textorch.models.cpu_routes import FAST


def test_tagging_outputs_compare_counts_label_and_score_differences() -> None:
    before = {"date/one": [[["B-x", "O"], ["3f800000", "3f000000"]], [["O"], ["3f800000"]]]}
    assert all(row["identical"] for row in tagging_outputs.compare(before, before))
    after = {"date/one": [[["B-x", "O"], ["3f800000", "3f000001"]], [["B-x"], ["3f800000"]]]}
    row, = tagging_outputs.compare(before, after)
    assert (row["sequences"], row["tokens"], row["label_differences"], row["score_differences"]) == (2, 3, 1, 1)
    assert not row["identical"]


def test_fast_path_ab_switches_each_path_off_through_the_routes_alone() -> None:
    """Every path the A/B script times is a field of ``CpuRoutes``, switched off by itself: a
    renamed or new route that the script does not know fails here, not mid-benchmark."""
    fields = {field.name for field in dataclasses.fields(FAST)}
    assert set(fast_path_ab.PATHS) == fields
    assert fast_path_ab.routes_for(None) is FAST
    for path in fast_path_ab.PATHS:
        off = fast_path_ab.routes_for(path)
        changed = {name for name in fields if getattr(off, name) != getattr(FAST, name)}
        assert changed == {path}
