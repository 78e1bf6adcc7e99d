"""The suite's tagging measures (benchmarks/peers/suite_tagging.py), with a runner that records the
processes it is asked for: every set-up tags the same model and file, the compared set-ups run in
rounds of fresh processes in turn, and the GROBID-sized calls read one calls file.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest

from recording_runner import RecordingRunner

from benchmarks.peers import bench_table
from benchmarks.peers import runner_common
from benchmarks.peers import suite_tagging


class _TestFiles:
    """The two systems' test files of a GROBID job (bench_data.TaskFiles' shape)."""

    format = "grobid"
    delft = {"test": "delft-test.txt"}
    textorch = {"test": "textorch-test.txt"}


def _seed1_models(work: Path) -> None:
    """Empty seed-1 model directories of the date job for both systems, where measure_tagging looks."""
    for path in (work / "models" / "delft" / "bench-date-BidLSTM_CRF-s1", work / "models" / "textorch" / "date-BidLSTM_CRF-s1"):
        path.mkdir(parents=True)


def test_every_tagging_set_up_runs_the_same_model_and_test_file(tmp_path):
    job = {"key": "date-BidLSTM_CRF"}
    _seed1_models(tmp_path)
    r = RecordingRunner(tmp_path, lambda system, args: ({"tagging": {"batch32": {"tokens_per_s": 1.0}}}, 0.0))
    settings = {"repeats": 3, "small_limit": 100, "bf16": False, "process_repeats": 0}
    out = suite_tagging.measure_tagging(r, job, _TestFiles(), settings)
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
    without = dict((key, args) for key, _, args in suite_tagging._textorch_variants("onnx", bf16=False))
    with_bf16 = dict((key, args) for key, _, args in suite_tagging._textorch_variants("onnx", bf16=True))
    assert set(with_bf16) - set(without) == {"textorch_bf16", "textorch_bf16_labels"}
    assert with_bf16["textorch_bf16_labels"] == ["--precision", "bf16", "--batch-sizes", "32", "256", "--labels-only"]
    assert {key for key, _ in bench_table.VARIANTS} >= set(with_bf16)  # every set-up gets its table rows


def test_the_auto_engine_variant_is_left_out_for_transformer_jobs() -> None:
    keys = [key for key, _, _ in suite_tagging._textorch_variants("onnx", bf16=False)]
    assert "textorch_auto" in keys
    assert [key for key, _, _ in suite_tagging._textorch_variants("onnx", bf16=False, auto=False)] == \
        [key for key in keys if key != "textorch_auto"]


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
    out = suite_tagging.measure_tagging(r, job, _TestFiles(), settings)
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
    out = suite_tagging.measure_tagging(FakeRunner(), job, _TestFiles(), settings)
    delft = out["delft"]["tagging"]["batch32"]
    assert delft["rounds_tokens_per_s"] == [100.0, 300.0] and out["delft"]["rounds"] == 2
    assert "model_dir_mb" in out["delft"] and "model_dir_mb" in out["textorch"]
    row = {r["metric"]: r for r in bench_table.build_rows([job], [], [out])}["tag tok/s, batch 32, new tokens"]
    # Two DeLFT rounds against three of textorch's: no pairs, the medians' ratio (600 / 200).
    assert "ratio_rounds" not in row and row["ratio"] == pytest.approx(3.0)


def test_grobid_calls_run_in_rounds_on_one_calls_file_for_the_grobid_tasks_only(tmp_path):
    test = tmp_path / "test.txt"
    test.write_text("a x L\n\nb y L\nc z L\n\n", encoding="utf-8")

    files = SimpleNamespace(format="grobid", delft={"test": str(test)}, textorch={"test": str(test)})
    _seed1_models(tmp_path)
    answer = {"tagging": {"grobid_calls": {"tokens_per_s": 1.0}}}
    r = RecordingRunner(tmp_path, lambda system, args: (answer, 0.0))
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF"}
    models = suite_tagging.model_dirs(r, job)
    settings = {"repeats": 3, "rounds": 2, "grobid_calls": True}
    out = suite_tagging.measure_grobid_calls(r, job, files, settings, models)
    assert set(out) == {"delft_calls", "textorch_calls"} and out["delft_calls"]["rounds"] == 2
    assert [system for system, _ in r.calls] == ["delft", "textorch", "textorch", "delft"]
    calls_files = {args[args.index("--calls") + 1] for _, args in r.calls}
    assert len(calls_files) == 1
    texts, n_sequences, _, per_call = runner_common.read_calls(calls_files.pop())
    assert (n_sequences, per_call) == (2, 30) and texts == ["a x\n\nb y\nc z\n"]
    for system, args in r.calls:
        assert args[:3] == ["calls", "--model", str(models[system])]
        assert args[args.index("--max-sequence-length") + 1] == str(suite_tagging.GROBID_MAX_SEQUENCE_LENGTH)
    for other in ({**job, "task": "conll"}, {**job, "transformer": "bert"}):
        assert suite_tagging.measure_grobid_calls(r, other, files, settings, models) == {}
    assert suite_tagging.measure_grobid_calls(r, job, files, {**settings, "grobid_calls": False}, models) == {}
