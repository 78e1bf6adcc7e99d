"""``--fold-parallel``: n-fold training with whole folds dealt to the ``--devices`` processes.

The property that matters: a spread run prints and saves exactly what a one-process run with
the same seed and threads does (each fold is seeded by its index, whichever rank trains it).
The real command runs with ``--devices 2`` (gloo, CPU) in a subprocess and is compared, byte
for byte, with ``--devices 1`` run in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import write_tiny_grobid
from test_distributed import REPO, _cli, _env, _processes_with, assert_killing_rank_1_ends_the_run
from textorch.classification.classifier import TextClassifier
from textorch.cli.main import main
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError
from textorch.tagging.labeler import SequenceLabeler
from textorch.train.fold_spread import folds_of, spread_folds
from textorch.train.history import read_history

pytestmark = pytest.mark.processes  # see tests/conftest.py: scheduled first

# Seed 1 makes fold 2 the best on validation: the kept model is trained by rank 1 and must
# travel to rank 0, which saves it.
SEQ = ["--max-epoch", "3", "--batch-size", "8", "--seed", "1", "--threads", "1"]
CLS = ["--max-epoch", "4", "--batch-size", "8", "--learning-rate", "0.02", "--hidden", "8", "--dense-size", "8",
       "--word-dim", "8", "--seed", "1", "--threads", "1", "--label-column", "alpha", "--label-column", "beta"]


def _run_here(args: list[str], capsys: pytest.CaptureFixture) -> str:
    """``textorch ARGS`` in this process; its stdout."""
    capsys.readouterr()
    assert main(args) == 0
    return capsys.readouterr().out


def _same_files(one: Path, two: Path, names: list[str]) -> None:
    for name in names:
        assert (two / name).read_bytes() == (one / name).read_bytes(), f"{name} differs"


# --------------------------------------------------------------------- no processes needed
def test_folds_are_dealt_round_robin() -> None:
    assert [folds_of(r, 2, 5) for r in range(2)] == [[0, 2, 4], [1, 3]]
    assert [folds_of(r, 3, 2) for r in range(3)] == [[0], [1], []]  # rank 2 has nothing to train
    assert sorted(i for r in range(4) for i in folds_of(r, 4, 10)) == list(range(10))


@pytest.mark.parametrize("mode, folds, world, spread", [
    ("auto", 3, 2, True), ("auto", 2, 2, True), ("auto", 2, 3, False), ("auto", 5, 1, False), ("auto", 1, 2, False),
    ("true", 2, 3, True), ("true", 4, 1, False), ("false", 8, 2, False),
])
def test_which_runs_spread_their_folds(mode: str, folds: int, world: int, spread: bool) -> None:
    assert spread_folds(mode, folds, world) is spread


def test_fold_parallel_without_folds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match="one of auto, true, false"):
        spread_folds("yes", 3, 2)
    data = write_tiny_grobid(tmp_path / "d.train", n=8)
    assert main(["seq", "train", "--train", str(data), "--output", str(tmp_path / "m"), "--fold-parallel", "true"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "textorch: error: --fold-parallel true needs --fold-count 2 or more (it spreads folds over the processes)"


# ----------------------------------------------------------------------- the real command
def test_seq_folds_spread_over_2_devices_equal_1_device(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = write_tiny_grobid(tmp_path / "date.train", n=40)
    common = ["seq", "train-eval", "--train", str(data), "--fold-count", "3", *SEQ]
    one = _run_here([*common, "--output", str(tmp_path / "one"), "--metrics-json", str(tmp_path / "one.json")], capsys)
    two = _cli([*common, "--output", str(tmp_path / "two"), "--metrics-json", str(tmp_path / "two.json"),
                "--devices", "2", "--fold-parallel", "true"])
    assert "3 folds spread over 2 processes" in two.stderr and "fold 2/3 (rank 1): validation f1" in two.stderr
    assert two.stderr.count("model saved") == 1
    assert two.stdout == one  # per-fold scores, mean ± sd, the saved model's report
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    folds = json.loads((tmp_path / "two.json").read_text())["folds"]
    assert folds["kept"] == 1 and len(set(folds["valid_f1"])) == 3  # rank 1's fold, no tie decided it
    # The kept model, trained by rank 1 and saved by rank 0, is the one process's, bit for bit.
    _same_files(tmp_path / "one", tmp_path / "two", ["model.safetensors", "vocab.json", "config.json"])
    history = [read_history(tmp_path / name) for name in ("one", "two")]
    assert history[1].kept_run == 1 and history[1].folds == history[0].folds
    assert [[(e["loss"], e["valid_score"]) for e in run.epochs] for run in history[1].runs] == \
           [[(e["loss"], e["valid_score"]) for e in run.epochs] for run in history[0].runs]
    test = read_labelled(data).sequences[:5]
    predictions = SequenceLabeler.load(tmp_path / "two").predict(test)
    assert [len(p.labels) for p in predictions] == [len(s) for s in test]


def test_fewer_folds_than_devices_leave_ranks_idle(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Two folds on three processes: rank 2 trains nothing and waits; results as with one process."""
    data = write_tiny_grobid(tmp_path / "date.train", n=24)
    common = ["seq", "train-eval", "--train", str(data), "--fold-count", "2", *SEQ, "--max-epoch", "2"]
    one = _run_here([*common, "--metrics-json", str(tmp_path / "one.json")], capsys)
    three = _cli([*common, "--metrics-json", str(tmp_path / "three.json"), "--devices", "3", "--fold-parallel", "true"])
    assert "1 process(es) have no fold and wait" in three.stderr
    assert three.stdout == one
    assert (tmp_path / "three.json").read_bytes() == (tmp_path / "one.json").read_bytes()


def _write_multi_label(path: Path, n: int = 48) -> Path:
    """Texts with one, both or neither of two topics: multi-label, so thresholds are tuned per member."""
    words = {"alpha": ["apple", "apricot", "avocado"], "beta": ["banana", "berry", "beet"]}
    rows = ["text,alpha,beta"]
    for i in range(n):
        alpha, beta = i % 2 == 0, i % 3 == 0
        text = " ".join(["we ate"] + [words["alpha"][i % 3]] * alpha + [words["beta"][i % 3]] * beta + ["today"] * (i % 4))
        rows.append(f"{text},{int(alpha)},{int(beta)}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_cls_members_spread_over_2_devices_equal_1_device(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The default (auto) spreads 3 members over 2 processes; every member's weights and tuned
    thresholds reach every process, so the ensemble's test scores are those of one process."""
    data = _write_multi_label(tmp_path / "topics.csv")
    common = ["cls", "train-eval", "--train", str(data), "--fold-count", "3", *CLS]
    one = _run_here([*common, "--output", str(tmp_path / "one"), "--metrics-json", str(tmp_path / "one.json")], capsys)
    two = _cli([*common, "--output", str(tmp_path / "two"), "--metrics-json", str(tmp_path / "two.json"), "--devices", "2"])
    assert "3 folds spread over 2 processes" in two.stderr
    assert two.stdout == one
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    _same_files(tmp_path / "one", tmp_path / "two", ["model.safetensors", "vocab.json"])
    configs = [json.loads((tmp_path / name / "config.json").read_text()) for name in ("one", "two")]
    assert configs[1]["member_thresholds"] == configs[0]["member_thresholds"]
    assert len({tuple(t) for t in configs[1]["member_thresholds"]}) > 1  # tuned per member, not the 0.5 default
    assert {k: v for k, v in configs[1].items() if k != "training_run"} == {k: v for k, v in configs[0].items() if k != "training_run"}
    classifier = TextClassifier.load(tmp_path / "two")
    assert len(classifier.predict(["we ate apple", "banana today"])) == 2


def test_a_worker_killed_inside_its_fold_fails_the_command(tmp_path: Path) -> None:
    data = write_tiny_grobid(tmp_path / "date.train", n=24)
    mark = uuid.uuid4().hex
    args = ["seq", "train", "--train", str(data), "--output", str(tmp_path / "m"), "--fold-count", "2", "--devices", "2",
            "--fold-parallel", "true", "--max-epoch", "100000", "--early-stop", "false", "--batch-size", "4"]
    process = subprocess.Popen([sys.executable, "-m", "textorch.cli.main", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=_env(mark), cwd=REPO, start_new_session=True)
    try:
        for line in process.stderr:  # rank 0 trains fold 1 while rank 1 trains fold 2
            if "epoch 1/" in line:
                break
        rank1 = [pid for pid in _processes_with(mark) if b"RANK=1" in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")]
        assert len(rank1) == 1
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    assert_killing_rank_1_ends_the_run(process, rank1[0], mark)
