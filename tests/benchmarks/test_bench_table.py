"""The suite's table (benchmarks/peers/bench_table.py): each row compares what it says it compares,
ratios are paired by round or seed where they can be, targets are set per metric, and missing data
is shown as missing. Built from hand-made results: timings are never measured here.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks.peers import bench_table
from benchmarks.peers import bench_vs_delft


def _run(system, f1, tok_s):
    return {"system": system, "key": "conll-BidLSTM_CRF", "f1": f1, "train_tokens_per_s": tok_s,
            "fit_tokens_per_s": tok_s / 2}


def test_table_ratios_targets_and_f1_difference():
    job = {"key": "conll-BidLSTM_CRF", "task": "conll", "architecture": "BidLSTM_CRF"}
    runs = [_run("textorch", 0.80, 9000), _run("textorch", 0.78, 12000), _run("delft", 0.79, 3000)]
    tagging = [{"key": job["key"],
                "textorch": {"tagging": {"batch32": {"tokens_per_s": 40000}}, "peak_rss_mb": 300,
                             "cold": [{"import_s": 2.0, "load_s": 0.5}, {"import_s": 3.0, "load_s": 0.5}]},
                "delft": {"tagging": {"batch32": {"tokens_per_s": 10000}}, "peak_rss_mb": 400,
                          "cold": [{"import_s": 6.0, "load_s": 0.1}]}}]
    rows = {r["metric"]: r for r in bench_table.build_rows([job], runs, tagging)}
    train = rows["train tok/s, epochs only (training batches)"]
    assert train["textorch"] == 10500 and train["ratio"] == pytest.approx(3.5) and train["met"] is True
    f1 = next(r for name, r in rows.items() if name.startswith("test F1"))
    assert f1["diff_points"] == pytest.approx(0.0) and f1["met"] is True
    batch32 = rows["tag tok/s, batch 32, new tokens"]
    assert batch32["ratio"] == pytest.approx(4.0) and batch32["met"] is False  # target is 5x
    assert rows["peak RSS while tagging (MB)"]["met"] is True
    cold = rows["cold start: import + model load (s)"]
    assert cold["textorch"] == pytest.approx(3.0) and cold["delft"] == pytest.approx(6.1)
    assert rows["tag tok/s, batch 256, new tokens"]["ratio"] is None  # missing data is shown, not invented


def test_training_ratio_pairs_each_seed_s_runs_when_both_systems_trained_the_same_seeds():
    job = {"key": "conll-BidLSTM_CRF", "task": "conll", "architecture": "BidLSTM_CRF"}
    ours, peer = (9000, 12000, 6000), (3000, 3000, 1000)
    runs = [{**_run("textorch", 0.8, t), "seed": seed} for seed, t in zip((1, 2, 3), ours)]
    runs += [{**_run("delft", 0.8, d), "seed": seed} for seed, d in zip((1, 2, 3), peer)]
    train = {r["metric"]: r for r in bench_table.build_rows([job], runs, [])}["train tok/s, epochs only (training batches)"]
    # Seed by seed 3x, 4x, 6x: the median 4x, where the medians' ratio would say 9000 / 3000.
    assert train["ratio_rounds"] == pytest.approx([3.0, 4.0, 6.0]) and train["ratio"] == pytest.approx(4.0)
    assert train["textorch"] == 9000 and train["delft"] == 3000
    unpaired = {r["metric"]: r for r in bench_table.build_rows([job], runs[:3] + runs[4:], [])}["train tok/s, epochs only (training batches)"]
    assert "ratio_rounds" not in unpaired and unpaired["ratio"] == pytest.approx(9000 / 2000)  # seed 1 missing for DeLFT


def test_bf16_training_runs_get_their_own_rows():
    job = {"key": "conll-BidLSTM_CRF", "task": "conll", "architecture": "BidLSTM_CRF"}
    runs = [_run("textorch", 0.80, 9000), _run("delft", 0.79, 3000), _run("textorch_bf16", 0.78, 10000),
            _run("textorch_bf16", 0.80, 9800)]
    rows = {r["metric"]: r for r in bench_table.build_rows([job], runs, [])}
    assert rows["train tok/s, epochs only (training batches)"]["textorch"] == 9000  # the bf16 runs stay out of the fp32 rows
    bf16 = rows["train tok/s, epochs only (training batches), bf16 training"]
    assert bf16["textorch"] == pytest.approx(9900) and bf16["ratio"] == pytest.approx(3.3) and bf16["met"] is True
    f1 = rows["test F1, mean of 1 seed(s), bf16 training"]
    assert f1["textorch"] == pytest.approx(0.79) and f1["diff_points"] == pytest.approx(0.0)
    assert not any("bf16" in r["metric"] for r in bench_table.build_rows([job], runs[:2], []))


def test_seen_tokens_stream_is_compared_with_the_peers_only_stream():
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    tagging = [{"key": job["key"],
                "textorch": {"tagging": {"stream": {"tokens_per_s": 2000}, "stream_seen": {"tokens_per_s": 3000}}},
                "textorch_onnx": {"tagging": {"stream": {"tokens_per_s": 4000}, "stream_seen": {"tokens_per_s": 4000}}},
                "delft": {"tagging": {"stream": {"tokens_per_s": 1000}}}}]
    rows = {r["metric"]: r for r in bench_table.build_rows([job], [], tagging)}
    seen = rows["tag tok/s, one-sequence calls, tokens seen before"]
    assert seen["delft"] == 1000 and seen["ratio"] == pytest.approx(3.0)
    assert seen["target"] is None  # the target is for the stream as it comes
    assert rows["tag tok/s, one-sequence calls, new tokens"]["met"] is False
    assert not any("seen before (ONNX" in name for name in rows)


def test_bf16_rows_and_the_f1_change_they_come_with():
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    tagging = [{"key": job["key"],
                "textorch": {"tagging": {"batch32": {"tokens_per_s": 2000}}, "f1": 0.9712},
                "textorch_bf16": {"tagging": {"batch32": {"tokens_per_s": 2600}, "stream_seen": {"tokens_per_s": 9}},
                                  "f1": 0.9690},
                "delft": {"tagging": {"batch32": {"tokens_per_s": 1000}}}}]
    rows = {r["metric"]: r for r in bench_table.build_rows([job], [], tagging)}
    bf16 = rows["tag tok/s, batch 32, new tokens (bf16)"]
    assert bf16["ratio"] == pytest.approx(2.6) and bf16["met"] is False and bf16["target"] == ">= 5x"
    change = rows["test F1 tagged in bf16 (fp32: 97.12), change"]
    assert change["diff_points"] == pytest.approx(-0.22) and change["delft"] is None and change["met"] is None
    assert not any("seen before (bf16" in name for name in rows)
    del tagging[0]["textorch"]["f1"]  # a run without --f1: no change row rather than a made-up one
    assert not any("bf16 (fp32" in r["metric"] for r in bench_table.build_rows([job], [], tagging))


def test_labels_only_rows_compare_the_same_output_as_the_peer():
    job = {"key": "conll-BidLSTM_CRF", "task": "conll", "architecture": "BidLSTM_CRF"}
    tagging = [{"key": job["key"],
                "textorch": {"tagging": {"batch32": {"tokens_per_s": 3000}}},
                "textorch_labels": {"tagging": {"batch32": {"tokens_per_s": 5500}, "stream": {"tokens_per_s": 900},
                                                "stream_seen": {"tokens_per_s": 1200}}},
                "delft": {"tagging": {"batch32": {"tokens_per_s": 1000}, "stream": {"tokens_per_s": 300}}}}]
    rows = {r["metric"]: r for r in bench_table.build_rows([job], [], tagging)}
    assert rows["tag tok/s, batch 32, new tokens"]["ratio"] == pytest.approx(3.0)  # the default rows are unchanged
    labels = rows["tag tok/s, batch 32, new tokens, labels only (DeLFT's output)"]
    assert labels["ratio"] == pytest.approx(5.5) and labels["met"] is True and labels["target"] == ">= 5x"
    stream = rows["tag tok/s, one-sequence calls, new tokens, labels only (DeLFT's output)"]
    assert stream["ratio"] == pytest.approx(3.0) and stream["met"] is True
    assert "tag tok/s, batch 256, new tokens, labels only (DeLFT's output)" not in rows  # not measured: no row


def test_int8_rows_come_with_their_f1_change():
    job = {"key": "date-BERT_CRF", "task": "date", "architecture": "BERT_CRF"}
    tagging = [{"key": job["key"],
                "textorch": {"tagging": {"batch32": {"tokens_per_s": 900}}, "f1": 0.9048},
                "textorch_onnx_int8": {"tagging": {"batch32": {"tokens_per_s": 1700}}, "f1": 0.9000},
                "delft": {"tagging": {"batch32": {"tokens_per_s": 750}}}}]
    rows = {r["metric"]: r for r in bench_table.build_rows([job], [], tagging)}
    int8 = rows["tag tok/s, batch 32, new tokens (ONNX engine, int8)"]
    assert int8["ratio"] == pytest.approx(1700 / 750) and int8["target"] == ">= 2x" and int8["met"] is True
    change = rows["test F1 tagged in int8 (ONNX) (fp32: 90.48), change"]
    assert change["diff_points"] == pytest.approx(-0.48) and change["delft"] is None


def test_ratio_targets_are_set_per_metric_and_architecture():
    lstm = {"task": "date", "architecture": "BidLSTM_CRF"}
    bert = {"task": "date", "architecture": "BERT_CRF"}
    assert bench_table.ratio_target(lstm, "batch32") == 5.0 and bench_table.ratio_target(lstm, "stream") == 3.0
    assert bench_table.ratio_target(bert, "batch32") == 2.0 and bench_table.ratio_target(bert, "stream") is None
    assert bench_table.ratio_target({"task": "conll", "architecture": "BidLSTM_CRF"}, "train") == 3.0
    assert bench_table.ratio_target(lstm, "train") is None


def test_f1_is_not_paired_when_the_two_systems_were_scored_on_different_sequences():
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    runs = [{"system": "textorch", "key": job["key"], "seed": 1, "f1": 0.9, "test_counts": [[1, 0, 0]], "gold_digest": "a"},
            {"system": "delft", "key": job["key"], "seed": 1, "f1": 0.8, "test_counts": [[1, 0, 0]], "gold_digest": "b"}]
    row = next(r for r in bench_table.build_rows([job], runs, []) if r["metric"].startswith("test F1"))
    assert "not paired" in row["metric"] and "ci95_points" not in row
    assert row["diff_points"] == pytest.approx(10.0)


def test_early_stopping_rows_give_epochs_run_and_no_tagging_rows():
    job = bench_vs_delft.early_stopping_jobs(["date"])[0]
    runs = [{"system": s, "key": job["key"], "seed": 1, "f1": 0.9, "epochs": e, "whole_s": w,
             "train_tokens_per_s": 1.0, "whole_tokens_per_s": 1.0} for s, e, w in (("textorch", 12, 30.0), ("delft", 20, 90.0))]
    rows = {row["metric"]: row for row in bench_table.build_rows([job], runs, [])}
    assert rows["epochs run, mean over seeds"]["textorch"] == 12 and rows["epochs run, mean over seeds"]["delft"] == 20
    assert rows["whole training call (s)"]["ratio"] == pytest.approx(1 / 3)
    assert not any(name.startswith("tag") or "RSS" in name for name in rows)


def test_grobid_call_rows_compare_the_facade_with_delft_and_with_textorch_s_predict():
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}

    def rate(*rounds: float) -> dict:
        return {"tokens_per_s": statistics.median(rounds), "rounds_tokens_per_s": list(rounds)}

    tag = {"key": job["key"],
           "delft_calls": {"per_call": 30, "tagging": {"grobid_calls": rate(100.0, 100.0, 100.0)}},
           "textorch_calls": {"per_call": 30, "tagging": {
               "grobid_calls": rate(300.0, 400.0, 200.0), "grobid_calls_seen": rate(500.0, 500.0, 500.0),
               "grobid_calls_predict": rate(400.0, 400.0, 400.0), "grobid_calls_predict_seen": rate(500.0, 500.0, 500.0)}}}
    rows = {row["metric"]: row for row in bench_table.grobid_call_rows(job, tag)}
    new = rows["GROBID-sized calls through the DeLFT interface (30 sequences a call), tok/s, new tokens"]
    assert new["ratio"] == pytest.approx(3.0) and new["target"] == ">= 3x" and new["met"] is True
    seen = rows["GROBID-sized calls through the DeLFT interface (30 sequences a call), tok/s, tokens seen before"]
    assert seen["ratio"] == pytest.approx(5.0) and seen["delft"] == 100.0 and seen["target"] is None
    cost = [row for name, row in rows.items() if "predict alone" in name]
    assert [row["ratio"] for row in cost] == pytest.approx([0.75, 1.0])  # round by round: 0.75, 1.0, 0.5
    assert bench_table.grobid_call_rows(job, {"key": job["key"]}) == []
    full = {row["metric"] for row in bench_table.build_rows([job], [], [tag])}
    assert set(rows) <= full  # the suite's table holds them too
