"""The side-by-side benchmark's own logic: data conversion, splits, ratios, targets, rounds,
fresh state, calls; and the fast-path A/B's switches.

Timings are never asserted here; these check that both systems get the same data and that
the table compares what it says it compares.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from conftest import write_tiny_grobid

from benchmarks.peers import bench_data
from benchmarks.peers import bench_table
from benchmarks.peers import bench_vs_delft
from benchmarks.peers import runner_common
from benchmarks.peers.runner_common import read_blocks


def test_iob1_to_iob2_opens_entities_with_b():
    tags = ["I-ORG", "I-ORG", "O", "I-PER", "B-PER", "I-LOC", "I-MISC"]
    assert bench_data.iob1_to_iob2(tags) == ["B-ORG", "I-ORG", "O", "B-PER", "B-PER", "B-LOC", "B-MISC"]


def test_convert_conll_writes_delft_two_column_iob2(tmp_path):
    source = tmp_path / "eng.train"
    source.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\n")
    target = tmp_path / "out" / "eng.train"
    bench_data.convert_conll(source, target)
    assert target.read_text() == "-DOCSTART-\tO\n\nEU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n"


def test_grobid_splits_are_disjoint_and_complete(tmp_path, monkeypatch):
    data = tmp_path / "shared"
    (data / "grobid" / "date").mkdir(parents=True)
    write_tiny_grobid(data / "grobid" / "date" / "date-220311.train", n=40)
    monkeypatch.setenv("TEXTORCH_SHARED_DATA", str(data))
    files = bench_data.prepare(tmp_path / "work", ["date"], [1, 2])
    original = read_blocks(data / "grobid" / "date" / "date-220311.train")
    for seed in (1, 2):
        parts = {role: read_blocks(Path(path)) for role, path in files[(("date", seed))].delft.items()}
        assert files[("date", seed)].textorch == files[("date", seed)].delft  # the very same files
        assert [len(parts[r]) for r in ("train", "valid", "test")] == [32, 4, 4]
        joined = sorted(map(tuple, parts["train"] + parts["valid"] + parts["test"]))
        assert joined == sorted(map(tuple, original))
    first = read_blocks(Path(files[("date", 1)].delft["test"]))
    second = read_blocks(Path(files[("date", 2)].delft["test"]))
    assert first != second  # the seed changes the split


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


def test_tagging_rows_start_every_new_tokens_pass_fresh_but_not_the_seen_stream():
    events = []
    tag = lambda data, batch_size: events.append(("tag", len(data), batch_size))  # noqa: E731
    rows = runner_common.tagging_rows(tag, ["a b", "c", "d e f"], [2, 1, 3], [32], small_limit=2, repeats=2,
                                      min_seconds=0.0, fresh=lambda: events.append(("fresh",)))
    assert set(rows) == {"batch32", "stream", "stream_seen"}
    assert rows["stream"]["n_tokens"] == 3 and rows["batch32"]["n_tokens"] == 6
    assert all(len(row["repeats_s"]) == 2 for row in rows.values())
    batch_part = events[: 2 * 3]  # warm-up + 2 repeats, each from a fresh state
    assert batch_part == [("fresh",), ("tag", 3, 32)] * 3
    stream_part = events[6:15]
    assert stream_part == [("fresh",), ("tag", 1, 1), ("tag", 1, 1)] * 3
    assert ("fresh",) not in events[15:] and len(events[15:]) == 2 * 3
    peer = runner_common.tagging_rows(tag, ["a b"], [2], [32], small_limit=1, repeats=1, min_seconds=0.0,
                                      seen_rows=False)
    assert set(peer) == {"batch32", "stream"}  # DeLFT: no memory of tokens, no seen row


def test_building_the_fresh_state_is_outside_the_clock_and_every_looped_call_gets_one(monkeypatch):
    clock = {"now": 0.0}
    monkeypatch.setattr(runner_common.time, "perf_counter", lambda: clock["now"])
    prepared = []

    def call() -> None:  # one second of work on the fake clock
        clock["now"] += 1.0

    def fresh() -> None:  # a hundred seconds of rebuilding state
        prepared.append(1)
        clock["now"] += 100.0

    times, loops = runner_common.repeat_seconds(call, repeats=2, min_seconds=2.5, prepare=fresh)
    assert loops == 3 and len(prepared) == 1 + 2 * loops  # the warm-up's, then one per timed call
    assert times == [1.0, 1.0]  # none of the rebuilding is timed


def test_repeat_seconds_loops_short_calls_and_rows_keep_every_repeat():
    calls = []
    times, loops = runner_common.repeat_seconds(lambda: calls.append(1), repeats=3, min_seconds=0.01)
    assert loops > 1 and len(calls) == 1 + 3 * loops and len(times) == 3 and max(times) < 0.01
    row = runner_common.timing_row([0.3, 0.1, 0.2], loops=2, n_sequences=5, tokens=40)
    assert row["tag_s"] == 0.2 and row["tokens_per_s"] == 200 and row["repeats_s"] == [0.3, 0.1, 0.2]


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


class _TestFiles:
    """The two systems' test files of a GROBID job (bench_data.TaskFiles' shape)."""

    format = "grobid"
    delft = {"test": "delft-test.txt"}
    textorch = {"test": "textorch-test.txt"}


def _seed1_models(work: Path) -> None:
    """Empty seed-1 model directories of the date job for both systems, where measure_tagging looks."""
    for path in (work / "models" / "delft" / "bench-date-BidLSTM_CRF-s1", work / "models" / "textorch" / "date-BidLSTM_CRF-s1"):
        path.mkdir(parents=True)


class _RecordingRunner:
    """Stands for bench_vs_delft.Runner: records each runner process asked for (system,
    options) and answers with ``answer(system, options)`` as (payload, wall seconds)."""

    def __init__(self, work: Path, answer) -> None:
        self.work = work
        self.answer = answer
        self.calls: list[tuple[str, list[str]]] = []

    def runner(self, system, name, args):
        self.calls.append((system, args))
        return self.answer(system, args)


def test_every_tagging_set_up_runs_the_same_model_and_test_file(tmp_path):
    job = {"key": "date-BidLSTM_CRF"}
    _seed1_models(tmp_path)
    r = _RecordingRunner(tmp_path, lambda system, args: ({"tagging": {"batch32": {"tokens_per_s": 1.0}}}, 0.0))
    settings = {"repeats": 3, "small_limit": 100, "bf16": False, "process_repeats": 0}
    out = bench_vs_delft.measure_tagging(r, job, _TestFiles(), settings)
    assert [system for system, _ in r.calls] == ["delft", "textorch", "textorch", "textorch", "textorch", "textorch"]
    for system, args in r.calls:
        assert args[:11] == ["tag", "--model", str(tmp_path / "models" / system / (("bench-" if system == "delft" else "")
                             + "date-BidLSTM_CRF-s1")), "--input", f"{system}-test.txt", "--format", "grobid",
                             "--repeats", "3", "--small-limit", "100"]
    extras = [args[11:] for _, args in r.calls]
    assert extras[0] == [] and extras[1] == ["--f1"]
    assert extras[2] == ["--batch-sizes", "32", "256", "--labels-only"]
    assert "--quantized" not in extras[3] and "--quantized" in extras[5]
    assert extras[3][extras[3].index("--onnx-dir") + 1] != extras[5][extras[5].index("--onnx-dir") + 1]
    assert extras[4] == ["--engine", "auto"]  # the server's default, exported into the model directory
    assert set(out) == {"key", "delft", "textorch", "textorch_labels", "textorch_onnx", "textorch_auto", "textorch_onnx_int8"}


def test_bf16_variants_come_only_with_native_bf16_and_include_labels_only() -> None:
    without = dict((key, args) for key, _, args in bench_vs_delft._textorch_variants("onnx", bf16=False))
    with_bf16 = dict((key, args) for key, _, args in bench_vs_delft._textorch_variants("onnx", bf16=True))
    assert set(with_bf16) - set(without) == {"textorch_bf16", "textorch_bf16_labels"}
    assert with_bf16["textorch_bf16_labels"] == ["--precision", "bf16", "--batch-sizes", "32", "256", "--labels-only"]
    assert {key for key, _ in bench_table.VARIANTS} >= set(with_bf16)  # every set-up gets its table rows


def test_the_auto_engine_variant_is_left_out_for_transformer_jobs() -> None:
    keys = [key for key, _, _ in bench_vs_delft._textorch_variants("onnx", bf16=False)]
    assert "textorch_auto" in keys
    assert [key for key, _, _ in bench_vs_delft._textorch_variants("onnx", bf16=False, auto=False)] == \
        [key for key in keys if key != "textorch_auto"]


def test_the_bert_job_runs_only_with_the_date_task_and_without_no_bert() -> None:
    assert bench_vs_delft.bert_left_out(False, ["conll", "name-header", "date"]) is None
    assert bench_vs_delft.bert_left_out(False, ["date"]) is None
    assert "--no-bert" in bench_vs_delft.bert_left_out(True, ["date"])
    assert "GROBID date" in bench_vs_delft.bert_left_out(False, ["conll", "name-header"])


def test_compared_set_ups_run_in_rounds_of_fresh_processes_in_turn(tmp_path):
    rates = {"delft": iter([100.0, 50.0, 80.0]), "textorch": iter([600.0, 200.0, 400.0]),
             "textorch_labels": iter([700.0, 300.0, 420.0])}

    class FakeRunner:
        work = tmp_path

        def __init__(self) -> None:
            self.calls: list[tuple[str, str, list[str]]] = []

        def runner(self, system, name, args):
            self.calls.append((system, name, args))
            key = "textorch_labels" if "--labels-only" in args and "--precision" not in args else system
            if "--engine" in args or "--precision" in args:
                return {"tagging": {"batch32": {"tokens_per_s": 1.0, "tag_s": 1.0}}}, 0.0
            rate = next(rates[key])
            return {"tagging": {"batch32": {"tokens_per_s": rate, "tag_s": 1 / rate, "repeats_s": [1 / rate]}},
                    "peak_rss_mb": rate}, 0.0

    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    _seed1_models(tmp_path)
    r = FakeRunner()
    settings = {"repeats": 3, "small_limit": 100, "bf16": False, "process_repeats": 0, "rounds": 3}
    out = bench_vs_delft.measure_tagging(r, job, _TestFiles(), settings)
    order = [(system, "--labels-only" in args) for system, _, args in r.calls[:9]]
    forward = [("delft", False), ("textorch", False), ("textorch", True)]
    assert order == forward + forward[::-1] + forward  # every other round the other way round
    assert len({(system, name) for system, name, _ in r.calls}) == len(r.calls)  # one log per process
    assert [args.count("--f1") for system, _, args in r.calls[:9] if system == "textorch" and "--labels-only" not in args] == [1, 0, 0]
    delft, ours = out["delft"]["tagging"]["batch32"], out["textorch"]["tagging"]["batch32"]
    assert delft["rounds_tokens_per_s"] == [100.0, 50.0, 80.0] and delft["tokens_per_s"] == 80.0
    assert len(delft["repeats_s"]) == 3 and out["delft"]["peak_rss_mb"] == 100.0 and out["delft"]["rounds"] == 3
    assert ours["tokens_per_s"] == 400.0
    rows = {row["metric"]: row for row in bench_table.build_rows([job], [], [out])}
    paired = rows["tag tok/s, batch 32, new tokens"]
    # Round by round 6x, 4x, 5x: the median 5x, where the medians' ratio would say 400 / 80.
    assert paired["ratio_rounds"] == pytest.approx([6.0, 4.0, 5.0]) and paired["ratio"] == pytest.approx(5.0)
    assert paired["met"] is True
    labels = rows["tag tok/s, batch 32, new tokens, labels only (DeLFT's output)"]
    assert labels["ratio"] == pytest.approx(statistics.median([7.0, 6.0, 5.25]))
    once = rows["tag tok/s, batch 32, new tokens (ONNX engine)"]  # timed once: against DeLFT's median
    assert "ratio_rounds" not in once and once["ratio"] == pytest.approx(1.0 / 80.0)


def test_a_failed_round_leaves_that_set_up_unpaired_and_every_other_round_kept(tmp_path):
    class FakeRunner:
        work = tmp_path
        delft_calls = 0

        def runner(self, system, name, args):
            if "--engine" in args or "--precision" in args:
                return {"tagging": {"batch32": {"tokens_per_s": 1.0}}}, 0.0
            if system == "delft":
                self.delft_calls += 1
                if self.delft_calls == 2:  # the runner logs it and returns no payload
                    return None, 0.0
                return {"tagging": {"batch32": {"tokens_per_s": 100.0 * self.delft_calls}}}, 0.0
            return {"tagging": {"batch32": {"tokens_per_s": 600.0}}}, 0.0

    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    _seed1_models(tmp_path)
    settings = {"repeats": 3, "small_limit": 100, "bf16": False, "process_repeats": 0, "rounds": 3}
    out = bench_vs_delft.measure_tagging(FakeRunner(), job, _TestFiles(), settings)
    delft = out["delft"]["tagging"]["batch32"]
    assert delft["rounds_tokens_per_s"] == [100.0, 300.0] and out["delft"]["rounds"] == 2
    assert "model_dir_mb" in out["delft"] and "model_dir_mb" in out["textorch"]
    row = {r["metric"]: r for r in bench_table.build_rows([job], [], [out])}["tag tok/s, batch 32, new tokens"]
    # Two DeLFT rounds against three of textorch's: no pairs, the medians' ratio (600 / 200).
    assert "ratio_rounds" not in row and row["ratio"] == pytest.approx(3.0)


def test_ratio_targets_are_set_per_metric_and_architecture():
    lstm = {"task": "date", "architecture": "BidLSTM_CRF"}
    bert = {"task": "date", "architecture": "BERT_CRF"}
    assert bench_table.ratio_target(lstm, "batch32") == 5.0 and bench_table.ratio_target(lstm, "stream") == 3.0
    assert bench_table.ratio_target(bert, "batch32") == 2.0 and bench_table.ratio_target(bert, "stream") is None
    assert bench_table.ratio_target({"task": "conll", "architecture": "BidLSTM_CRF"}, "train") == 3.0
    assert bench_table.ratio_target(lstm, "train") is None


def test_tagging_outputs_compare_counts_label_and_score_differences() -> None:
    from benchmarks.diagnostics import tagging_outputs

    before = {"date/one": [[["B-x", "O"], ["3f800000", "3f000000"]], [["O"], ["3f800000"]]]}
    assert all(row["identical"] for row in tagging_outputs.compare(before, before))
    after = {"date/one": [[["B-x", "O"], ["3f800000", "3f000001"]], [["B-x"], ["3f800000"]]]}
    row, = tagging_outputs.compare(before, after)
    assert (row["sequences"], row["tokens"], row["label_differences"], row["score_differences"]) == (2, 3, 1, 1)
    assert not row["identical"]


class _SplitFiles:
    """One seed's train/valid/test files of a GROBID job (bench_data.TaskFiles' shape)."""

    format = "grobid"
    delft = textorch = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}


def _training_runner(tmp_path: Path, gold: list[list[str]], preds: dict[str, list[list[str]]]) -> _RecordingRunner:
    """A runner whose ``train`` processes write the given predictions where they are told to."""

    def train(system: str, args: list[str]) -> tuple[dict, float]:
        label = "textorch_bf16" if "bf16" in args else system
        path = Path(args[args.index("--predictions") + 1])
        path.write_text(__import__("json").dumps({"gold": gold, "pred": preds[label]}))
        seed = int(args[args.index("--seed") + 1])
        return {"f1": 0.5, "epochs": 3, "train_tokens_per_s": 10.0, "whole_tokens_per_s": 5.0, "seed": seed,
                "whole_s": 2.0}, 1.0

    return _RecordingRunner(tmp_path, train)


def test_training_order_alternates_with_the_seed_and_every_run_is_scored_by_one_scorer(tmp_path):
    gold = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "O"]]
    preds = {"delft": [["B-PER", "I-PER", "O"], ["O", "O", "O"]], "textorch": gold, "textorch_bf16": gold}
    r = _training_runner(tmp_path, gold, preds)
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF", "epochs": 4, "setting": "fixed epochs"}
    files = {("date", seed): _SplitFiles() for seed in (1, 2, 3)}
    runs = bench_vs_delft.train_all(r, [job], files, [1, 2, 3], Path("vectors.txt"), bf16_tasks=("date",))
    order = [("bf16" in args and "textorch_bf16") or system for system, args in r.calls]
    assert order == ["delft", "textorch", "textorch_bf16", "textorch", "delft", "textorch_bf16",
                     "delft", "textorch", "textorch_bf16"]
    assert [bench_vs_delft.first_system(seed) for seed in (1, 2, 3)] == ["delft", "textorch", "delft"]
    for system, args in r.calls:  # the same fixed settings for both systems
        assert args[args.index("--epochs") + 1] == "4" and args[args.index("--patience") + 1] == "5"
    delft, ours = runs[0], runs[1]
    assert delft["system"] == "delft" and delft["test_counts"] == [[1, 0, 0], [0, 0, 1]]
    assert ours["test_counts"] == [[1, 0, 0], [1, 0, 0]] and ours["gold_digest"] == delft["gold_digest"]
    assert delft["f1_counts"] == pytest.approx(2 / 3)
    rows = {row["metric"]: row for row in bench_table.build_rows([job], runs, [])}
    f1 = rows["test F1, 3 seed(s) pooled"]
    assert f1["diff_points"] == pytest.approx(100 * (1 - 2 / 3)) and f1["seeds"] == [1, 2, 3]
    low, high = f1["ci95_points"]
    assert low <= f1["diff_points"] <= high and f1["within_noise"] is (low <= 0 <= high)
    assert "test F1, 3 seed(s) pooled, bf16 training" in rows
    comparisons = bench_vs_delft.f1_comparisons(bench_table.build_rows([job], runs, []))
    assert [(c["job"], c["setting"]) for c in comparisons] == [("date-BidLSTM_CRF", "fixed epochs"),
                                                               ("date-BidLSTM_CRF", "fixed epochs, bf16 training")]
    assert comparisons[0]["f1_diff_ci95"] == [low, high]


def test_f1_is_not_paired_when_the_two_systems_were_scored_on_different_sequences():
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    runs = [{"system": "textorch", "key": job["key"], "seed": 1, "f1": 0.9, "test_counts": [[1, 0, 0]], "gold_digest": "a"},
            {"system": "delft", "key": job["key"], "seed": 1, "f1": 0.8, "test_counts": [[1, 0, 0]], "gold_digest": "b"}]
    row = next(r for r in bench_table.build_rows([job], runs, []) if r["metric"].startswith("test F1"))
    assert "not paired" in row["metric"] and "ci95_points" not in row
    assert row["diff_points"] == pytest.approx(10.0)


def test_early_stopping_jobs_train_each_system_at_its_own_defaults():
    jobs = bench_vs_delft.early_stopping_jobs(bench_vs_delft.EARLY_STOPPING_TASKS)
    assert {job["task"] for job in jobs} == {"date", "name-citation", "name-header", "affiliation-address", "figure",
                                            "conll"}
    conll = next(job for job in jobs if job["task"] == "conll")
    delft, ours = bench_vs_delft._training_options(conll, seed=2)
    assert delft[-2:] == ["--defaults", "ner"] and ours[-2:] == ["--preset", "ner"]
    assert "--epochs" not in delft + ours and "--patience" not in delft + ours
    date = next(job for job in jobs if job["task"] == "date")
    assert bench_vs_delft._training_options(date, 1)[1][-1] == "grobid:date"
    assert set(bench_data.GROBID_FILES) >= {"date", "name-citation", "name-header", "affiliation-address"}


def test_early_stopping_rows_give_epochs_run_and_no_tagging_rows():
    job = bench_vs_delft.early_stopping_jobs(["date"])[0]
    runs = [{"system": s, "key": job["key"], "seed": 1, "f1": 0.9, "epochs": e, "whole_s": w,
             "train_tokens_per_s": 1.0, "whole_tokens_per_s": 1.0} for s, e, w in (("textorch", 12, 30.0), ("delft", 20, 90.0))]
    rows = {row["metric"]: row for row in bench_table.build_rows([job], runs, [])}
    assert rows["epochs run, mean over seeds"]["textorch"] == 12 and rows["epochs run, mean over seeds"]["delft"] == 20
    assert rows["whole training call (s)"]["ratio"] == pytest.approx(1 / 3)
    assert not any(name.startswith("tag") or "RSS" in name for name in rows)


def test_both_systems_processes_run_under_the_same_allocator_settings(tmp_path, monkeypatch):
    from textorch.runtime.malloc_tuning import MMAP_THRESHOLD, TRIM_THRESHOLD, keep_freed_memory

    env = bench_vs_delft.allocator_env()
    assert env == {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
    r = bench_vs_delft.Runner(tmp_path, Path(sys.executable))
    show = "import json, os; print('BENCH_JSON ' + json.dumps({k: os.environ.get(k) for k in %r}))" % list(env)
    for system in ("delft", "textorch"):  # both start through Runner.run, with its environment
        payload, _ = r.run(f"env-{system}", [sys.executable, "-c", show])
        assert {name: payload[name] for name in env} == env  # (Runner.run adds the process's CPU seconds)
    # textorch's own tuning, seeing glibc's variables set, leaves them be: one setting for both.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert keep_freed_memory() is False


def test_training_measures_share_one_definition_and_short_predictions_are_completed(tmp_path):
    speeds = runner_common.training_speeds([3, 5], [1.0, 3.0], 8.0)
    assert speeds["n_train_tokens"] == 8 and speeds["epochs"] == 2 and speeds["epochs_s"] == 4.0
    assert speeds["train_tokens_per_s"] == pytest.approx(4.0) and speeds["whole_tokens_per_s"] == pytest.approx(2.0)
    path = tmp_path / "p.json"
    runner_common.write_predictions(str(path), [["B-X", "O", "O"]], [["B-X"]])
    assert __import__("json").loads(path.read_text())["pred"] == [["B-X", "O", "O"]]
    with pytest.raises(ValueError, match="1 gold sequences but 0 predicted"):
        runner_common.write_predictions(str(path), [["O"]], [])
    runner_common.write_predictions(None, [["O"]], [])  # no file asked for: nothing written, nothing checked


def test_a_fresh_token_state_forgets_every_token_and_tags_the_same(tmp_path):
    from benchmarks.peers import textorch_runner
    from textorch.data.readers import read_grobid
    from textorch.embeddings import open_embeddings
    from textorch.tagging.config import DataConfig, ModelConfig
    from textorch.tagging.labeler import SequenceLabeler

    corpus = read_grobid(write_tiny_grobid(tmp_path / "tiny.train", n=12))
    words = sorted({t for s in corpus.sequences for t in s.tokens})
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("".join(f"{w} " + " ".join(f"{(i * 7 + k) % 5 / 10:.1f}" for k in range(4)) + "\n"
                               for i, w in enumerate(words)))
    cache = str(tmp_path / "cache")
    embeddings = open_embeddings(str(vectors), cache_dir=cache)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF"), DataConfig(embeddings=str(vectors)),
                                    embeddings, seed=1)
    labeler.model.eval()
    before = [p.labels for p in labeler.predict(corpus.sequences[:4], batch_size=2)]
    for sequence in corpus.sequences[4:8]:
        labeler.predict([sequence], batch_size=1)
    memories = lambda: (len(labeler.word_table), len(labeler.embeddings._memo), len(labeler.encoder._shapes),  # noqa: E731
                        len(labeler.token_vector_cache))
    assert all(size > 1 for size in memories())
    old = labeler.embeddings
    textorch_runner.fresh_token_state(labeler, cache)
    assert memories() == (1, 0, 0, 0) and labeler.embeddings is not old  # the padding row alone
    assert [p.labels for p in labeler.predict(corpus.sequences[:4], batch_size=2)] == before


def test_grobid_call_texts_are_feature_lines_without_labels_cut_into_calls():
    from textorch.tagging.delft.reader import load_data_crf_string

    blocks = [[f"w{i}{j} f{i}{j} X I-<a>" for j in range(i + 1)] for i in range(5)]
    texts = runner_common.grobid_call_texts(blocks, per_call=2)
    assert len(texts) == 3  # 2 + 2 + the 1 left
    assert texts[0] == "w00 f00 X\n\nw10 f10 X\nw11 f11 X\n"  # a blank line after each sequence but the last
    assert "I-<a>" not in "".join(texts)
    tokens, features = [], []
    for text in texts:
        x, f = load_data_crf_string(text)
        tokens += x
        features += f
    assert tokens == [[line.split()[0] for line in block] for block in blocks]
    assert features == [[line.split()[1:3] for line in block] for block in blocks]
    with pytest.raises(ValueError):
        runner_common.grobid_call_texts(blocks, per_call=0)


def test_the_call_texts_file_is_what_both_runners_read(tmp_path):
    blocks = [["a x L"], ["b y L", "c z L"], ["d w L"]]
    path = tmp_path / "calls.json"
    runner_common.write_calls(str(path), blocks, per_call=2)
    texts, n_sequences, tokens, per_call = runner_common.read_calls(str(path))
    assert texts == runner_common.grobid_call_texts(blocks, 2)
    assert (n_sequences, tokens, per_call) == (3, 4, 2)


def test_grobid_call_passes_start_fresh_after_one_untimed_pass_and_the_seen_passes_do_not():
    events = []
    rows = runner_common.grobid_call_rows(lambda text: events.append(("call", text)), ["t1", "t2"], 3, 7, repeats=2,
                                          min_seconds=0.0, fresh=lambda: events.append(("fresh",)))
    assert set(rows) == {"grobid_calls", "grobid_calls_seen"}
    assert rows["grobid_calls"]["n_tokens"] == 7 and rows["grobid_calls"]["n_sequences"] == 3
    one_pass = [("call", "t1"), ("call", "t2")]
    # the extra untimed pass, repeat_seconds' warm-up, then 2 repeats: each from a fresh state
    assert events[:12] == [("fresh",), *one_pass] * 4
    assert events[12:] == one_pass * 3  # seen: warm-up and 2 repeats, no reset
    peer = runner_common.grobid_call_rows(lambda text: None, ["t"], 1, 1, repeats=1, min_seconds=0.0,
                                          name="x", seen_rows=False)
    assert set(peer) == {"x"}


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


def test_grobid_calls_run_in_rounds_on_one_calls_file_for_the_grobid_tasks_only(tmp_path):
    test = tmp_path / "test.txt"
    test.write_text("a x L\n\nb y L\nc z L\n\n", encoding="utf-8")

    from types import SimpleNamespace

    files = SimpleNamespace(format="grobid", delft={"test": str(test)}, textorch={"test": str(test)})
    _seed1_models(tmp_path)
    answer = {"tagging": {"grobid_calls": {"tokens_per_s": 1.0}}}
    r = _RecordingRunner(tmp_path, lambda system, args: (answer, 0.0))
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    models = bench_vs_delft.model_dirs(r, job)
    settings = {"repeats": 3, "rounds": 2, "grobid_calls": True}
    out = bench_vs_delft.measure_grobid_calls(r, job, files, settings, models)
    assert set(out) == {"delft_calls", "textorch_calls"} and out["delft_calls"]["rounds"] == 2
    assert [system for system, _ in r.calls] == ["delft", "textorch", "textorch", "delft"]
    calls_files = {args[args.index("--calls") + 1] for _, args in r.calls}
    assert len(calls_files) == 1
    texts, n_sequences, _, per_call = runner_common.read_calls(calls_files.pop())
    assert (n_sequences, per_call) == (2, 30) and texts == ["a x\n\nb y\nc z\n"]
    for system, args in r.calls:
        assert args[:3] == ["calls", "--model", str(models[system])]
        assert args[args.index("--max-sequence-length") + 1] == str(bench_vs_delft.GROBID_MAX_SEQUENCE_LENGTH)
    for other in ({**job, "task": "conll"}, {**job, "transformer": "bert"}):
        assert bench_vs_delft.measure_grobid_calls(r, other, files, settings, models) == {}
    assert bench_vs_delft.measure_grobid_calls(r, job, files, {**settings, "grobid_calls": False}, models) == {}


def test_a_predicted_padding_label_names_no_entity() -> None:
    """DeLFT's BERT_CRF can predict its '<PAD>' label: the scorer reads it as O, it does not stop."""
    from benchmarks.peers import f1_bootstrap

    gold = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "O"]]
    pred = [["B-PER", "I-PER", "<PAD>"], ["<PAD>", "O", "O"]]
    assert f1_bootstrap.sequence_counts(gold, pred).tolist() == [[1, 0, 0], [0, 0, 1]]


def test_fixed_epoch_jobs_give_textorch_its_applications_training_rules():
    """Same fixed settings for both; textorch adds what its application trains with (DeLFT's
    rate cut everywhere, random batches on GROBID corpora), and the runner applies them."""
    conll = {"task": "conll", "architecture": "BidLSTM_CRF", "epochs": 3, "key": "conll-BidLSTM_CRF"}
    date = {"task": "date", "architecture": "BidLSTM_CRF", "epochs": 10, "key": "date-BidLSTM_CRF"}
    delft, ours = bench_vs_delft._training_options(conll, seed=1)
    assert ours[:len(delft)] == delft and "--train-option" not in delft
    assert ours[len(delft):] == ["--train-option", "lr_decay=0.5"]
    assert bench_vs_delft._training_options(date, 1)[1][-4:] == ["--train-option", "lr_decay=0.5", "--train-option", "bucket_batches=1"]
    from benchmarks.peers import textorch_runner
    from textorch.train.config import TrainConfig

    config = textorch_runner._with_train_options(TrainConfig(), ["lr_decay=0.5", "bucket_batches=1"])
    assert (config.lr_decay, config.bucket_batches) == (0.5, 1)
    with pytest.raises(SystemExit, match="no field 'bucket'"):
        textorch_runner._with_train_options(TrainConfig(), ["bucket=1"])
    flags = textorch_runner._with_train_options(TrainConfig(), ["early_stop=false", "tensorboard_dir=/tmp/tb"])
    assert (flags.early_stop, flags.tensorboard_dir) == (False, "/tmp/tb")
    for bad in ("early_stop=no", "bucket_batches=ten"):
        with pytest.raises(SystemExit, match="not a (bool|int) value"):
            textorch_runner._with_train_options(TrainConfig(), [bad])


def test_results_of_separate_seeds_pool_into_one_table_and_other_modes_are_refused():
    job = bench_vs_delft.early_stopping_jobs(["date"])[0]

    def payload(seed: int, textorch_counts: list, mode: str = "full-early-stopping") -> dict:
        runs = [{"system": s, "key": job["key"], "task": "date", "architecture": "BidLSTM_CRF", "preset": "grobid:date",
                 "seed": seed, "f1": 0.5, "epochs": 10, "whole_s": 1.0, "train_tokens_per_s": 1.0,
                 "whole_tokens_per_s": 1.0, "test_counts": c, "gold_digest": "g"}
                for s, c in (("textorch", textorch_counts), ("delft", [[1, 0, 0], [0, 0, 1]]))]
        return {"mode": mode, "method": 2, "command": f"--seeds {seed}", "machine": {}, "settings": {"seeds": [seed]},
                "train_runs": runs, "tagging": [], "wall_s": 60.0}

    both = bench_vs_delft.pooled([payload(1, [[1, 0, 0], [1, 0, 0]]), payload(2, [[1, 0, 0], [0, 0, 1]])])
    f1_row = next(r for r in both["rows"] if r["metric"].startswith("test F1"))
    assert f1_row["metric"] == "test F1, 2 seed(s) pooled" and both["settings"]["seeds"] == [1, 2]
    # textorch finds 3 of 4 entities, DeLFT 2 of 4 (precision 1 both): F1 6/7 against 2/3
    assert f1_row["diff_points"] == pytest.approx(100 * (6 / 7 - 2 / 3))
    assert both["f1"][0]["seeds"] == [1, 2] and both["wall_s"] == 120.0
    with pytest.raises(SystemExit, match="one mode and method"):
        bench_vs_delft.pooled([payload(1, [[1, 0, 0]] * 2), payload(2, [[1, 0, 0]] * 2, mode="full")])
    with pytest.raises(SystemExit, match="seed 1 is in more than one file"):
        bench_vs_delft.pooled([payload(1, [[1, 0, 0]] * 2), payload(1, [[1, 0, 0]] * 2)])


def test_a_table_file_that_is_missing_or_not_results_is_one_line_naming_it(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"mode": "full",\n  "rows": [1,,]}\n')
    other = tmp_path / "other.json"
    other.write_text('{"rows": []}\n')
    for path, message in ((tmp_path / "absent.json", "cannot read it"), (broken, ":2: not JSON"),
                          (other, "not a results file")):
        with pytest.raises(SystemExit) as stopped:
            bench_vs_delft.reprint([path])
        assert str(stopped.value).startswith(f"--table {path}") and message in str(stopped.value)


def test_fast_path_ab_switches_each_path_off_through_the_routes_alone() -> None:
    """Every path the A/B script times is a field of ``CpuRoutes``, switched off by itself: a
    renamed or new route that the script does not know fails here, not mid-benchmark."""
    import dataclasses

    from benchmarks.ab import fast_path_ab

    from textorch.models.cpu_routes import FAST

    fields = {field.name for field in dataclasses.fields(FAST)}
    assert set(fast_path_ab.PATHS) == fields
    assert fast_path_ab.routes_for(None) is FAST
    for path in fast_path_ab.PATHS:
        off = fast_path_ab.routes_for(path)
        changed = {name for name in fields if getattr(off, name) != getattr(FAST, name)}
        assert changed == {path}


def test_read_blocks_cuts_lines_at_newlines_only_as_wapiti_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "mixed.train"
    path.write_bytes("a\x0cb F I-<x>\r\nc F <x>\r\n \r\nd F I-<y>\n\n\ne F I-<y>".encode("utf-8"))
    assert read_blocks(path) == [["a\x0cb F I-<x>", "c F <x>"], ["d F I-<y>"], ["e F I-<y>"]]
