"""The suite's results files read back (benchmarks/peers/suite_results.py): runs of one mode pool into
one table, a seed counted twice or another mode is refused, a bad file is one line naming it.
"""

from __future__ import annotations

import pytest

from benchmarks.peers import bench_vs_delft
from benchmarks.peers import suite_results


def test_results_of_separate_seeds_pool_into_one_table_and_other_modes_are_refused():
    job = bench_vs_delft.early_stopping_jobs(["date"])[0]

    def payload(seed: int, textorch_counts: list, mode: str = "full-early-stopping") -> dict:
        runs = [{"system": s, "key": job["key"], "task": "date", "architecture": "BidLSTM_CRF", "preset": "grobid:date",
                 "seed": seed, "f1": 0.5, "epochs": 10, "whole_s": 1.0, "train_tokens_per_s": 1.0,
                 "whole_tokens_per_s": 1.0, "test_counts": c, "gold_digest": "g"}
                for s, c in (("textorch", textorch_counts), ("delft", [[1, 0, 0], [0, 0, 1]]))]
        return {"mode": mode, "method": 2, "command": f"--seeds {seed}", "machine": {}, "settings": {"seeds": [seed]},
                "train_runs": runs, "tagging": [], "wall_s": 60.0}

    both = suite_results.pooled([payload(1, [[1, 0, 0], [1, 0, 0]]), payload(2, [[1, 0, 0], [0, 0, 1]])])
    f1_row = next(r for r in both["rows"] if r["metric"].startswith("test F1"))
    assert f1_row["metric"] == "test F1, 2 seed(s) pooled" and both["settings"]["seeds"] == [1, 2]
    # textorch finds 3 of 4 entities, DeLFT 2 of 4 (precision 1 both): F1 6/7 against 2/3
    assert f1_row["diff_points"] == pytest.approx(100 * (6 / 7 - 2 / 3))
    assert both["f1"][0]["seeds"] == [1, 2] and both["wall_s"] == 120.0
    with pytest.raises(SystemExit, match="one mode and method"):
        suite_results.pooled([payload(1, [[1, 0, 0]] * 2), payload(2, [[1, 0, 0]] * 2, mode="full")])
    with pytest.raises(SystemExit, match="seed 1 is in more than one file"):
        suite_results.pooled([payload(1, [[1, 0, 0]] * 2), payload(1, [[1, 0, 0]] * 2)])


def test_a_table_file_that_is_missing_or_not_results_is_one_line_naming_it(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"mode": "full",\n  "rows": [1,,]}\n')
    other = tmp_path / "other.json"
    other.write_text('{"rows": []}\n')
    for path, message in ((tmp_path / "absent.json", "cannot read it"), (broken, ":2: not JSON"),
                          (other, "not a results file")):
        with pytest.raises(SystemExit) as stopped:
            suite_results.reprint([path])
        assert str(stopped.value).startswith(f"--table {path}") and message in str(stopped.value)
