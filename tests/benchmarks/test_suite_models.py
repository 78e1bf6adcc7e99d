"""The saved models of the fast-path A/B: ``prepare`` builds exactly the
models ``bench_vs_delft`` keeps, where the A/B looks for them, and only the missing ones."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import prepare
from benchmarks.peers import bench_vs_delft
from benchmarks.peers import suite_tagging
from benchmarks.suite_models import AB_MODELS, model_dir, require_models


@pytest.fixture
def bench_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEXTORCH_BENCH_DIR", str(tmp_path))
    return tmp_path


def _build(name: str) -> None:
    model_dir(name).mkdir(parents=True)
    (model_dir(name) / "config.json").write_text("{}")


def test_prepare_builds_the_peer_comparisons_seed1_models_where_the_ab_scripts_look(bench_dir: Path) -> None:
    jobs = prepare.jobs_for(list(AB_MODELS))
    assert [job["task"] for job in jobs] == list(AB_MODELS)
    for job in jobs:
        assert job["epochs"] == bench_vs_delft.FULL["epochs"][job["task"]] and job["seeds"] == [1]
        kept = suite_tagging.model_dirs(SimpleNamespace(work=bench_dir), job)["textorch"]
        assert kept == model_dir(job["task"]) and kept.is_relative_to(bench_dir)


def test_prepare_trains_only_the_missing_models_unless_forced(bench_dir: Path) -> None:
    _build("date")
    (model_dir("conll")).mkdir(parents=True)  # half-written: no config.json
    assert [job["task"] for job in prepare.jobs_for(["conll", "date"])] == ["conll"]
    assert [job["task"] for job in prepare.jobs_for(["conll", "date"], force=True)] == ["conll", "date"]


def test_a_missing_model_stops_the_benchmark_with_the_prepare_command(bench_dir: Path) -> None:
    _build("date")
    require_models(["date"])
    with pytest.raises(SystemExit, match=r"conll-BidLSTM_CRF-s1.*python -m benchmarks prepare --models conll date"):
        require_models(["conll", "date"])
