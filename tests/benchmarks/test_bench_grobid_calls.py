"""The GROBID-calls benchmark end to end on tiny models (``--quick``): it trains them, runs the four
calls through the facade and writes one row per call and engine (no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks
from benchmarks.features import bench_grobid_calls

REPO = Path(benchmarks.__file__).resolve().parents[1]


@pytest.mark.real_data
@pytest.mark.processes  # six of them (four trainings): scheduled first, see tests/conftest.py
def test_quick_run_writes_a_row_per_call_and_engine(tmp_path: Path) -> None:
    if not (bench_grobid_calls.SHARED_DATA / "grobid/header").is_dir():
        pytest.skip("the shared GROBID corpora are not here")
    output = tmp_path / "calls.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "bench_grobid_calls", "--quick", "--engines", "torch",
                           "--work", str(tmp_path / "work"), "--output", str(output)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(output.read_text())["rows"]
    assert {(r["call"], r["engine"], r["tree"]) for r in rows} == {(c, "torch", "this") for c in bench_grobid_calls.CALLS}
    sizes = {r["call"]: (r["sequences"], r["tokens"]) for r in rows}
    assert sizes["date"][0] == 1 and sizes["names"][0] == 30
    assert sizes["header"] == (1, 400) and sizes["bibliography"] == (1, 2000)
    assert all(r["repeats"] == 3 and r["median_ms"] > 0 for r in rows)
    assert "| call |" in done.stdout


def test_training_files_and_inputs_come_from_the_corpora(tmp_path: Path) -> None:
    if not (bench_grobid_calls.SHARED_DATA / "grobid/header").is_dir():
        pytest.skip("the shared GROBID corpora are not here")
    training = bench_grobid_calls.prepare(tmp_path, quick=True)
    inputs = json.loads((tmp_path / "inputs.json").read_text())
    assert set(training) == {model for model, *_ in bench_grobid_calls.CALLS.values()}
    for call, variants in inputs.items():
        assert len(variants) == bench_grobid_calls.VARIANTS
        for variant in variants:  # one feature list per token, none holding the label
            assert [len(f) for f in variant["f"]] == [len(x) for x in variant["x"]]
            assert not any(row[-1].startswith("I-<") for rows in variant["f"] for row in rows)
