"""The suite's training runs (benchmarks/peers/suite_training.py): the order of the systems per
seed, the options each runner trains with, and one scorer for every run's predictions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recording_runner import RecordingRunner

from benchmarks.peers import bench_table
from benchmarks.peers import suite_results
from benchmarks.peers import suite_training
from benchmarks.peers import textorch_runner

from textorch.train.config import TrainConfig


class _SplitFiles:
    """One seed's train/valid/test files of a GROBID job (bench_data.TaskFiles' shape)."""

    format = "grobid"
    delft = textorch = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}


def _training_runner(tmp_path: Path, gold: list[list[str]], preds: dict[str, list[list[str]]]) -> RecordingRunner:
    """A runner whose ``train`` processes write the given predictions where they are told to."""

    def train(system: str, args: list[str]) -> tuple[dict, float]:
        label = "textorch_bf16" if "bf16" in args else system
        path = Path(args[args.index("--predictions") + 1])
        path.write_text(json.dumps({"gold": gold, "pred": preds[label]}))
        seed = int(args[args.index("--seed") + 1])
        return {"f1": 0.5, "epochs": 3, "train_tokens_per_s": 10.0, "whole_tokens_per_s": 5.0, "seed": seed,
                "whole_s": 2.0}, 1.0

    return RecordingRunner(tmp_path, train)


def test_training_order_alternates_with_the_seed_and_every_run_is_scored_by_one_scorer(tmp_path):
    gold = [["B-PER", "I-PER", "O"], ["B-LOC", "O", "O"]]
    preds = {"delft": [["B-PER", "I-PER", "O"], ["O", "O", "O"]], "textorch": gold, "textorch_bf16": gold}
    r = _training_runner(tmp_path, gold, preds)
    job = {"key": "date-BidLSTM_CRF", "task": "date", "architecture": "BidLSTM_CRF", "epochs": 4, "setting": "fixed epochs"}
    files = {("date", seed): _SplitFiles() for seed in (1, 2, 3)}
    runs = suite_training.train_all(r, [job], files, [1, 2, 3], Path("vectors.txt"), bf16_tasks=("date",))
    order = [("bf16" in args and "textorch_bf16") or system for system, args in r.calls]
    assert order == ["delft", "textorch", "textorch_bf16", "textorch", "delft", "textorch_bf16",
                     "delft", "textorch", "textorch_bf16"]
    assert [suite_training.first_system(seed) for seed in (1, 2, 3)] == ["delft", "textorch", "delft"]
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
    comparisons = suite_results.f1_comparisons(bench_table.build_rows([job], runs, []))
    assert [(c["job"], c["setting"]) for c in comparisons] == [("date-BidLSTM_CRF", "fixed epochs"),
                                                               ("date-BidLSTM_CRF", "fixed epochs, bf16 training")]
    assert comparisons[0]["f1_diff_ci95"] == [low, high]


def test_fixed_epoch_jobs_give_textorch_its_applications_training_rules():
    """Same fixed settings for both; textorch adds what its application trains with (DeLFT's
    rate cut everywhere, random batches on GROBID corpora), and the runner applies them."""
    conll = {"task": "conll", "architecture": "BidLSTM_CRF", "epochs": 3, "key": "conll-BidLSTM_CRF"}
    date = {"task": "date", "architecture": "BidLSTM_CRF", "epochs": 10, "key": "date-BidLSTM_CRF"}
    delft, ours = suite_training._training_options(conll, seed=1)
    assert ours[:len(delft)] == delft and "--train-option" not in delft
    assert ours[len(delft):] == ["--train-option", "lr_decay=0.5"]
    assert suite_training._training_options(date, 1)[1][-4:] == ["--train-option", "lr_decay=0.5", "--train-option", "bucket_batches=1"]
    config = textorch_runner._with_train_options(TrainConfig(), ["lr_decay=0.5", "bucket_batches=1"])
    assert (config.lr_decay, config.bucket_batches) == (0.5, 1)
    with pytest.raises(SystemExit, match="no field 'bucket'"):
        textorch_runner._with_train_options(TrainConfig(), ["bucket=1"])
    flags = textorch_runner._with_train_options(TrainConfig(), ["early_stop=false", "tensorboard_dir=/tmp/tb"])
    assert (flags.early_stop, flags.tensorboard_dir) == (False, "/tmp/tb")
    for bad in ("early_stop=no", "bucket_batches=ten"):
        with pytest.raises(SystemExit, match="not a (bool|int) value"):
            textorch_runner._with_train_options(TrainConfig(), [bad])
