"""The suite's job lists (benchmarks/peers/bench_vs_delft.py): which jobs a run trains and which it
leaves out.
"""

from __future__ import annotations

from benchmarks.peers import bench_data
from benchmarks.peers import bench_vs_delft
from benchmarks.peers import suite_training


def test_the_bert_job_runs_only_with_the_date_task_and_without_no_bert() -> None:
    assert bench_vs_delft.bert_left_out(False, ["conll", "name-header", "date"]) is None
    assert bench_vs_delft.bert_left_out(False, ["date"]) is None
    assert "--no-bert" in bench_vs_delft.bert_left_out(True, ["date"])
    assert "GROBID date" in bench_vs_delft.bert_left_out(False, ["conll", "name-header"])


def test_early_stopping_jobs_train_each_system_at_its_own_defaults():
    jobs = bench_vs_delft.early_stopping_jobs(bench_vs_delft.EARLY_STOPPING_TASKS)
    assert {job["task"] for job in jobs} == {"date", "name-citation", "name-header", "affiliation-address", "figure",
                                            "conll"}
    conll = next(job for job in jobs if job["task"] == "conll")
    delft, ours = suite_training._training_options(conll, seed=2)
    assert delft[-2:] == ["--defaults", "ner"] and ours[-2:] == ["--preset", "ner"]
    assert "--epochs" not in delft + ours and "--patience" not in delft + ours
    date = next(job for job in jobs if job["task"] == "date")
    assert suite_training._training_options(date, 1)[1][-1] == "grobid:date"
    assert set(bench_data.GROBID_FILES) >= {"date", "name-citation", "name-header", "affiliation-address"}
