"""Data-parallel training and inference on CPU with gloo, world size 2 (issue 5).

Numerical properties run the same scenario function in one process and in two processes
started with ``torch.multiprocessing`` and compare; command-level properties start the real
CLI with ``--devices 2`` and check its outputs, exit codes, stderr and leftover processes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from textorch.cli.main import main
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.batching import bucketed_batches
from textorch.data.readers import read_conll
from textorch.errors import ConfigError
from textorch.tagging.labeler import SequenceLabeler
from textorch.train.dist import DistContext, session
from textorch.train.launch import torchrun_arguments
from textorch.train.parallel import plan_micro_batches
from textorch.train.trainer import Trainer

pytestmark = pytest.mark.processes  # see tests/conftest.py: scheduled first

REPO = Path(__file__).resolve().parents[2]
TINY = ModelConfig(char_dim=8, char_hidden=8, word_hidden=8, feature_dim=2, feature_output_dim=4, dropout=0.0)
PEOPLE = ["John", "Mary", "Peter", "Anna", "Paul"]
PLACES = ["Paris", "Berlin", "Rome", "Madrid"]
# Log lines ("12:00:00 INFO ...") are the only thing allowed on stderr of a successful run.
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING) ")


# ----------------------------------------------------------------------------- data
def _sentence(i: int) -> list[tuple[str, str]]:
    """Sentences of 3 to 9 tokens, so that length bucketing and uneven shards happen."""
    rows = [(PEOPLE[i % 5], "I-PER"), ("lives", "O"), ("in", "O"), (PLACES[i % 4], "I-LOC")]
    rows += [("with", "O"), (PEOPLE[(i + 2) % 5], "I-PER")] if i % 3 == 0 else []
    rows += [("since", "O"), (str(1990 + i), "O")] if i % 2 == 0 else []
    return rows[: 3 + i % 7] if i % 4 == 3 else rows


def _write_conll(path: Path, n: int, start: int = 0, extra_label: bool = False) -> Path:
    lines = []
    for i in range(start, start + n):
        rows = _sentence(i)
        if extra_label and i % 2 == 0:  # a label the model never saw in training
            rows = rows + [("Euro", "I-MISC")]
        lines += [f"{token} {tag}" for token, tag in rows] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------- scenario (1 or 2 processes)
def _sgd(model: torch.nn.Module, config: TrainConfig, total_steps: int):
    """Plain SGD: unlike Adam it is not invariant to the gradient's scale, so it checks it."""
    return torch.optim.SGD(model.parameters(), lr=config.learning_rate), None


class _Recorder:
    """Training data that remembers which sequences each epoch asked for."""

    def __init__(self, data) -> None:
        self.data, self.epochs, self.current = data, [], []

    def lengths(self) -> list[int]:
        return self.data.lengths()

    def batch(self, indices: list[int]):
        self.current.extend(indices)
        return self.data.batch(indices)

    def on_epoch_end(self, trainer, record, is_best) -> None:
        self.epochs.append(self.current)
        self.current = []


def _labeler(train_path: Path) -> SequenceLabeler:
    return SequenceLabeler.build(read_conll(train_path), TINY, DataConfig(), None, "cpu", seed=7)


def _train_params(train_path: Path, ctx: DistContext, **overrides) -> tuple[dict, list]:
    labeler = _labeler(train_path)
    data = _Recorder(labeler.encode(read_conll(train_path).sequences, with_labels=True))
    config = TrainConfig(**{"batch_size": 4, "learning_rate": 0.5, "max_epoch": 2, "clip_grad": 0.0, **overrides})
    Trainer(labeler.model, config, torch.device("cpu"), ctx, optimizer_factory=_sgd, callbacks=[data]).fit(data)
    return {k: v.detach().clone() for k, v in labeler.model.state_dict().items()}, data.epochs


def _scenarios(ctx: DistContext, train_path: Path, dev_path: Path) -> dict:
    """Everything compared between one process and two; run identically in both settings."""
    out: dict = {}
    # 9 sequences, global batch 4: batches of 4, 4 and 1; the last leaves rank 1 an empty shard.
    out["sgd"], out["seen"] = _train_params(train_path, ctx)
    out["sgd_accum"], _ = _train_params(train_path, ctx, grad_accum=2)
    out["sgd_clipped"], _ = _train_params(train_path, ctx, clip_grad=0.05)

    labeler = _labeler(train_path)
    result = labeler.fit(read_conll(train_path), read_conll(dev_path),
                         TrainConfig(batch_size=3, learning_rate=0.05, max_epoch=30, patience=2), ctx=ctx)
    out["history"] = [(r.epoch, r.valid_score) for r in result.history]
    out["stopped"] = (result.stopped_early, result.best_epoch)
    dev = read_conll(dev_path)
    out["counts_reduced"] = labeler.count_entities(dev.sequences, batch_size=2, ctx=ctx)
    out["counts_single"] = labeler.count_entities(dev.sequences, batch_size=2)
    out["predictions"] = [(p.labels, p.scores) for p in labeler.predict(dev.sequences, batch_size=2, ctx=ctx)]
    out["predictions_single"] = [(p.labels, p.scores) for p in labeler.predict(dev.sequences, batch_size=2)]

    # A parameter the forward pass never uses (a transformer's pooler, say): DDP must be told,
    # or the second step fails waiting for its gradient.
    with_unused = _WithUnused(_labeler(train_path).model)
    data = _labeler(train_path).encode(read_conll(train_path).sequences, with_labels=True)
    Trainer(with_unused, TrainConfig(batch_size=4, max_epoch=1), torch.device("cpu"), ctx).fit(data)
    out["unused_untouched"] = bool((with_unused.unused.weight == 1.0).all())

    def rank_dependent(model: torch.nn.Module) -> float:
        return float(ctx.rank)

    try:
        Trainer(_labeler(train_path).model, TrainConfig(batch_size=4, max_epoch=1), torch.device("cpu"), ctx,
                validate=rank_dependent).fit(_labeler(train_path).encode(read_conll(train_path).sequences, with_labels=True))
        out["disagreement"] = None
    except RuntimeError as exc:
        out["disagreement"] = str(exc)
    return out


class _WithUnused(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.unused = torch.nn.Linear(2, 2)
        torch.nn.init.ones_(self.unused.weight)

    def forward(self, batch):
        return self.inner(batch)


def _worker(rank: int, world: int, port: int, train_path: Path, dev_path: Path, out_dir: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    with session("cpu", threads=1) as (ctx, _):
        assert ctx.enabled and ctx.world_size == world
        results = _scenarios(ctx, train_path, dev_path)
    torch.save(results, out_dir / f"rank{rank}.pt")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("dist-data")
    return _write_conll(root / "train.conll", 9), _write_conll(root / "dev.conll", 7, start=20, extra_label=True)


@pytest.fixture(scope="module")
def two_ranks(corpora: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out_dir = tmp_path_factory.mktemp("dist-ranks")
    mp.start_processes(_worker, args=(2, _free_port(), *corpora, out_dir), nprocs=2, start_method="spawn")
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=False) for r in range(2)]


@pytest.fixture(scope="module")
def one_rank(corpora: tuple[Path, Path]) -> dict:
    return _scenarios(DistContext(), *corpora)


def _assert_close(a: dict, b: dict, atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def test_parameters_identical_on_both_ranks(two_ranks: list[dict]) -> None:
    for key in ("sgd", "sgd_accum", "sgd_clipped"):
        for name, value in two_ranks[0][key].items():
            assert torch.equal(value, two_ranks[1][key][name]), f"{key}/{name} differs between ranks"


def test_two_ranks_of_b_equal_one_rank_of_2b(two_ranks: list[dict], one_rank: dict, corpora: tuple[Path, Path]) -> None:
    """Global batch 4 = 2 ranks x 2 (and a last batch of 1: 1 + an empty shard) vs 1 x 4, SGD."""
    initial = _labeler(corpora[0]).model.state_dict()
    moved = max(float((one_rank["sgd"][k] - initial[k]).abs().max()) for k in initial)
    assert moved > 1e-2  # the comparison below is between trained weights, not two copies of the init
    _assert_close(two_ranks[0]["sgd"], one_rank["sgd"])
    _assert_close(two_ranks[0]["sgd_clipped"], one_rank["sgd_clipped"])


def test_gradient_accumulation_equals_one_batch(two_ranks: list[dict], one_rank: dict) -> None:
    _assert_close(one_rank["sgd_accum"], one_rank["sgd"])  # K=2 on one process
    _assert_close(two_ranks[0]["sgd_accum"], one_rank["sgd"])  # K=2 on two processes (no_sync)


def test_epochs_see_every_sequence_in_a_new_order(two_ranks: list[dict], one_rank: dict) -> None:
    for epochs in [one_rank["seen"], two_ranks[0]["seen"], two_ranks[1]["seen"]]:
        assert len(epochs) == 2 and epochs[0] != epochs[1]
    assert sorted(one_rank["seen"][0]) == list(range(9)) == sorted(one_rank["seen"][1])
    for epoch in range(2):
        assert set(two_ranks[0]["seen"][epoch]) | set(two_ranks[1]["seen"][epoch]) == set(range(9))
    assert bucketed_batches(list(range(1, 10)), 4, 42, 1, 10) != bucketed_batches(list(range(1, 10)), 4, 42, 2, 10)


def test_reduced_f1_equals_single_process_f1(two_ranks: list[dict]) -> None:
    for rank in two_ranks:
        reduced, single = rank["counts_reduced"], rank["counts_single"]
        assert reduced == single  # every count, per label, the gold-only MISC included
        assert reduced.scores() == single.scores()
        assert reduced.fn.get("MISC", 0) == 4 and reduced.n_sequences == 7


def test_both_ranks_stop_at_the_same_epoch(two_ranks: list[dict]) -> None:
    assert two_ranks[0]["history"] == two_ranks[1]["history"]
    assert two_ranks[0]["stopped"] == two_ranks[1]["stopped"]
    assert two_ranks[0]["stopped"][0] is True and len(two_ranks[0]["history"]) < 30


def test_distributed_predictions_equal_single_process(two_ranks: list[dict], corpora: tuple[Path, Path]) -> None:
    """Labels *and* float scores, in input order, on every rank."""
    dev_lengths = [len(s) for s in read_conll(corpora[1]).sequences]
    for rank in two_ranks:
        assert rank["predictions"] == rank["predictions_single"]
        assert [len(labels) for labels, _ in rank["predictions"]] == dev_lengths


def test_unused_parameters_do_not_break_ddp(two_ranks: list[dict], one_rank: dict) -> None:
    assert one_rank["unused_untouched"] and all(rank["unused_untouched"] for rank in two_ranks)


def test_rank_dependent_validation_score_is_refused(two_ranks: list[dict], one_rank: dict) -> None:
    assert one_rank["disagreement"] is None
    for rank in two_ranks:
        assert "differ across processes" in rank["disagreement"]


# ------------------------------------------------------------------ no processes needed
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("accum", [1, 2, 3])
def test_micro_batch_plan_partitions_the_global_batch(world: int, accum: int) -> None:
    """Contiguous, disjoint, complete, in order; sizes differ by at most one (first ranks larger)."""
    for size in range(1, 12):
        batch = list(range(100, 100 + size))
        plans = [plan_micro_batches(batch, DistContext(rank, rank, world, world), accum) for rank in range(world)]
        joined = [i for k in range(accum) for rank in range(world) for i in plans[rank][k]]
        assert joined == batch
        for k in range(accum):
            sizes = [len(plans[rank][k]) for rank in range(world)]
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_batch_size_rule_when_it_does_not_divide() -> None:
    """10 sequences on 4 processes: 3, 3, 2, 2."""
    sizes = [len(plan_micro_batches(list(range(10)), DistContext(r, r, 4, 4), 1)[0]) for r in range(4)]
    assert sizes == [3, 3, 2, 2]
    assert TrainConfig(batch_size=10, grad_accum=2).micro_batch_size(4) == 2


def test_bf16_autocast_trains_on_cpu(corpora: tuple[Path, Path], one_rank: dict) -> None:
    params, _ = _train_params(corpora[0], DistContext(), precision="bf16")
    assert all(torch.isfinite(v).all() for v in params.values())
    # Close to fp32, but not equal: the emission layer really ran in bfloat16.
    _assert_close(params, one_rank["sgd"], atol=0.1)
    assert any(not torch.equal(params[k], one_rank["sgd"][k]) for k in params)


def test_precision_and_accumulation_are_checked() -> None:
    with pytest.raises(ConfigError, match="fp16 needs a CUDA"):
        Trainer(torch.nn.Linear(2, 2), TrainConfig(precision="fp16"), torch.device("cpu"))
    with pytest.raises(ConfigError, match="--precision"):
        TrainConfig(precision="fp8")
    with pytest.raises(ConfigError, match="--grad-accum"):
        TrainConfig(batch_size=4, grad_accum=5)


def test_torchrun_command_lines() -> None:
    single = torchrun_arguments(["seq", "tag", "--devices", "2"], 2)
    assert single[:3] == ["--standalone", "--nproc-per-node", "2"]  # free port, never a fixed one
    assert single[-5:] == ["textorch.cli.main", "seq", "tag", "--devices", "2"]
    multi = torchrun_arguments(["seq", "train"], 4, nnodes=2, node_rank=1, endpoint="10.0.0.1:29400")
    assert multi[:6] == ["--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "10.0.0.1:29400"]


def test_slurm_step_variables_give_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.train.dist import context_from_env

    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert context_from_env() == DistContext()  # a batch script without srun is one process
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "8")
    monkeypatch.setenv("SLURM_STEP_NUM_NODES", "2")
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    assert context_from_env() == DistContext(rank=5, local_rank=1, world_size=8, local_world_size=4)


# --------------------------------------------------------------- the real command, N = 2
def _env(mark: str) -> dict:
    """Environment of a CLI run: a marker every descendant inherits, for the leftover check.

    torch keeps a compiler cache folder in the temporary directory (created when fused Adam
    imports its compiler), made once and kept across runs on purpose: it goes where it would
    go for this test process, not into the run's scratch TMPDIR that must stay empty. ONNX Runtime
    (the default engine's) writes its telemetry session file ``TMPDIR/.ses`` at every session
    unless ``ORT_DISABLE_TELEMETRY`` is set: set here, so that the check sees textorch's leftovers."""
    inductor_cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(Path(tempfile.gettempdir()) / "torchinductor_textorch_tests")
    return {**os.environ, "TEXTORCH_TEST_MARK": mark, "PYTHONPATH": str(REPO), "TORCHINDUCTOR_CACHE_DIR": inductor_cache,
            "ORT_DISABLE_TELEMETRY": "1"}


def _processes_with(mark: str) -> list[int]:
    """Live processes (ours) whose environment carries ``mark``."""
    found = []
    needle = f"TEXTORCH_TEST_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
                state = (entry / "stat").read_text().split()[2]
            except OSError:
                continue
            if needle in environ.split(b"\0") and state != "Z":
                found.append(int(entry.name))
    return found


def _cli(args: list[str], timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``textorch ARGS`` in a fresh interpreter; afterwards no process of it may remain,
    and nothing may be left in its temporary directory (the launcher's run folder)."""
    mark = uuid.uuid4().hex
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run([sys.executable, "-m", "textorch.cli.main", *args], capture_output=True, text=True,
                                timeout=timeout, env={**_env(mark), "TMPDIR": scratch}, cwd=REPO)
        assert list(Path(scratch).iterdir()) == [], "temporary files left behind"
    assert _processes_with(mark) == [], "processes left behind"
    if check:
        assert result.returncode == 0, result.stderr
        assert [line for line in result.stderr.splitlines() if not LOG_LINE.match(line)] == [], result.stderr
    return result


def _without_volatile(text: str) -> list[str]:
    return [line for line in text.splitlines() if not re.match(r'\s*"(date|runtime)":', line)]


FAST = ["--max-epoch", "3", "--batch-size", "4", "--learning-rate", "0.05", "--seed", "3"]


@pytest.fixture(scope="module")
def cli_model(corpora: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model trained with ``seq train-eval --devices 2`` (also checks that run)."""
    model = tmp_path_factory.mktemp("dist-cli") / "model"
    result = _cli(["seq", "train-eval", "--train", str(corpora[0]), "--valid", str(corpora[1]), "--test", str(corpora[1]),
                   "--output", str(model), "--devices", "2", *FAST])
    assert result.stdout.count("micro avg") == 1  # the report is printed once, by rank 0
    assert "starting 2 workers" in result.stderr and result.stderr.count("model saved") == 1
    # dev.conll's label the training file lacks: one warning per role (valid, test), as one
    # process gives, not one per rank
    assert result.stderr.count("never occurs in the training file") == 2, result.stderr
    return model


def test_devices_1_and_2_both_save_a_model_that_loads(cli_model: Path, corpora: tuple[Path, Path], tmp_path: Path) -> None:
    single = tmp_path / "single"  # through a fresh process too: clean stderr and exit with N = 1
    _cli(["seq", "train", "--train", str(corpora[0]), "--valid", str(corpora[1]), "--output", str(single), "--devices", "1", *FAST])
    dev = read_conll(corpora[1]).sequences
    for directory in (cli_model, single):
        assert sorted(p.name for p in directory.iterdir()) == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
        predictions = SequenceLabeler.load(directory).predict(dev)
        assert [len(p.labels) for p in predictions] == [len(s) for s in dev]


def test_tag_and_eval_with_2_devices_equal_1_device(cli_model: Path, tmp_path: Path) -> None:
    """Byte for byte (but for date and runtime), given the same CPU threads per process.

    Torch's CPU kernels (the LSTM's among them) round differently with another thread
    count, which moves the 6th decimal of some scores; so both runs use one thread each. Both
    run PyTorch (``--engine torch``): by default one process takes the torch-free tagger and two
    take the labeler's runners, whose CRF decoders agree to 1e-4 (tests/onnx), not byte for byte.
    """
    text = tmp_path / "in.txt"
    lines = [" ".join(token for token, _ in _sentence(i)) + (" ." if i % 3 else "") for i in range(13)]
    text.write_text("\n".join(lines[:6] + [""] + lines[6:]) + "\n", encoding="utf-8")
    one = tmp_path / "one.json"
    common = ["--model", str(cli_model), "--input", str(text), "--batch-size", "2", "--threads", "1", "--engine", "torch"]
    assert main(["seq", "tag", *common, "--output", str(one)]) == 0
    two = _cli(["seq", "tag", *common, "--devices", "2"])
    assert len(json.loads(two.stdout)["texts"]) == 14
    # On stdout the answer streams, so its runtime (known at the end) follows the texts: the same
    # document, the same records byte for byte.
    streamed, whole = json.loads(two.stdout), json.loads(one.read_text(encoding="utf-8"))
    assert list(streamed)[-1] == "runtime" and list(whole)[-1] == "texts"
    for document in (streamed, whole):
        document.pop("date"), document.pop("runtime")
    assert streamed == whole
    assert _without_volatile(two.stdout)[:-2] == _without_volatile(one.read_text(encoding="utf-8"))[:-2]

    gold = tmp_path / "gold.conll"
    _write_conll(gold, 11, start=40, extra_label=True)
    metrics = {n: tmp_path / f"eval{n}.json" for n in (1, 2)}
    common = ["--model", str(cli_model), "--test", str(gold), "--batch-size", "3", "--threads", "1", "--engine", "torch"]
    assert main(["seq", "eval", *common, "--metrics-json", str(metrics[1])]) == 0
    _cli(["seq", "eval", *common, "--metrics-json", str(metrics[2]), "--devices", "2"])
    assert metrics[2].read_bytes() == metrics[1].read_bytes()


def test_data_error_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The same message as a single process prints, once (not once per worker), exit 2."""
    args = ["seq", "train", "--train", str(tmp_path / "absent.conll"), "--output", str(tmp_path / "m")]
    assert main(args) == 2
    single = capsys.readouterr().err
    assert "absent.conll" in single
    result = _cli([*args, "--devices", "2"], check=False)
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if not LOG_LINE.match(line)] == single.splitlines()


def _start_long_run(train: Path, tmp_path: Path, mark: str) -> subprocess.Popen:
    args = ["seq", "train", "--train", str(train), "--output", str(tmp_path / "m"), "--devices", "2",
            "--max-epoch", "100000", "--early-stop", "false", "--batch-size", "4"]
    return subprocess.Popen([sys.executable, "-m", "textorch.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(mark), cwd=REPO, start_new_session=True)


def _wait_for_training(process: subprocess.Popen, mark: str) -> dict[int, int]:
    """Local rank -> pid of the workers, once rank 0 has logged its first epoch."""
    for line in process.stderr:
        if "epoch 1/" in line:
            break
    else:
        pytest.fail("training never started")
    workers = {}
    for pid in _processes_with(mark):
        environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item)
        if b"LOCAL_RANK" in environ:
            workers[int(environ[b"LOCAL_RANK"])] = pid
    return workers


class _Ended(Exception):
    """Stands for ``os._exit`` in-process."""


@pytest.mark.parametrize("joined", [True, False])
def test_a_process_of_a_group_ends_after_exit_handlers_without_finalization(
        joined: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker ends through ``os._exit`` with its command's code once exit handlers have run
    (logging flushed): interpreter finalization once aborted a finished worker (see
    ``dist.end_group_process``). Any other process returns the code as usual."""
    from textorch.train import dist

    happened: list[object] = []

    def fake_exit(code: int) -> None:
        happened.append(code)
        raise _Ended

    monkeypatch.setattr(dist, "_joined_a_group", joined)
    monkeypatch.setattr(dist.atexit, "_run_exitfuncs", lambda: happened.append("exit handlers"))
    monkeypatch.setattr(dist.os, "_exit", fake_exit)
    command = ["seq", "tag", "--model", str(tmp_path / "missing"), "--input", str(tmp_path / "missing.txt")]
    if joined:
        with pytest.raises(_Ended):
            main(command)
        assert happened == ["exit handlers", 2]
    else:
        assert main(command) == 2 and happened == []


def test_killed_worker_fails_the_command_without_hanging(corpora: tuple[Path, Path], tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    process = _start_long_run(corpora[0], tmp_path, mark)
    try:
        workers = _wait_for_training(process, mark)
        assert sorted(workers) == [0, 1]
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    assert_killing_rank_1_ends_the_run(process, workers[1], mark)


def assert_killing_rank_1_ends_the_run(process: subprocess.Popen, rank1_pid: int, mark: str) -> None:
    """SIGKILL rank 1 of a running command: the command exits 1 within a minute, names the
    killed worker without a traceback, and leaves no process behind."""
    try:
        killed_at = time.monotonic()
        os.kill(rank1_pid, signal.SIGKILL)
        _, stderr = process.communicate(timeout=60)
        assert time.monotonic() - killed_at < 60
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 1
    assert f"worker rank 1 (pid {rank1_pid}) was killed by SIGKILL" in stderr
    assert "Traceback" not in stderr
    assert _processes_with(mark) == []


def test_ctrl_c_stops_every_process(corpora: tuple[Path, Path], tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    process = _start_long_run(corpora[0], tmp_path, mark)
    try:
        _wait_for_training(process, mark)
        os.killpg(process.pid, signal.SIGINT)  # what the terminal sends to the foreground group
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130
    assert stderr.count("textorch: interrupted") == 1 and "Traceback" not in stderr
    assert _processes_with(mark) == []


def _communicate_all(nodes: list[subprocess.Popen], timeout: float) -> list[tuple[str, str]]:
    """Every process's (stdout, stderr), read at the same time: one node blocked on a full pipe
    must not stall the others. Past ``timeout`` all are killed and the failure shows what each
    had written (a node that fails leaves the others waiting in torch's exit barrier)."""
    outputs: list[tuple[str, str]] = [("", "")] * len(nodes)

    def read(i: int) -> None:
        outputs[i] = nodes[i].communicate()

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(nodes))]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    for reader in readers:
        reader.join(max(deadline - time.monotonic(), 0))
    stuck = [i for i, node in enumerate(nodes) if node.poll() is None]
    for i in stuck:
        nodes[i].kill()
    for reader in readers:
        reader.join()
    if stuck:
        report = "\n".join(f"--- node {i} (exit {node.returncode}):\n{outputs[i][1][-4000:]}" for i, node in enumerate(nodes))
        pytest.fail(f"node(s) {stuck} still running after {timeout:.0f} s\n{report}")
    return outputs


def test_two_machines_on_localhost_train_and_save(corpora: tuple[Path, Path], tmp_path: Path) -> None:
    """``--nnodes 2``: two launchers, one worker each, meeting at node 0's endpoint."""
    mark = uuid.uuid4().hex
    endpoint = f"127.0.0.1:{_free_port()}"
    model = tmp_path / "model"
    nodes = []
    for node_rank in (0, 1):
        args = ["seq", "train", "--train", str(corpora[0]), "--output", str(model), *FAST, "--threads", "1",
                "--nnodes", "2", "--node-rank", str(node_rank), "--rdzv-endpoint", endpoint]
        nodes.append(subprocess.Popen([sys.executable, "-m", "textorch.cli.main", *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=_env(mark), cwd=REPO))
    outputs = _communicate_all(nodes, timeout=150)
    assert [node.returncode for node in nodes] == [0, 0], [err for _, err in outputs]
    assert "model saved" in outputs[0][1] and "model saved" not in outputs[1][1]
    assert SequenceLabeler.load(model).predict(read_conll(corpora[1]).sequences)
    assert _processes_with(mark) == []


class _Failure:
    """Stands in for torch's ProcessFailure (which reads the worker's error file)."""

    def __init__(self, exitcode: int, message: str = "", secondary: bool | None = None) -> None:
        self.exitcode, self.pid, self.message = exitcode, 100 + exitcode, message
        self.error_file_data = {} if secondary is None else {"textorch": True, "secondary": secondary}

    def signal_name(self) -> str:
        return signal.Signals(-self.exitcode).name


def test_failure_report_names_the_root_cause() -> None:
    from textorch.train.launch import _describe_failure

    data_error = _describe_failure({0: _Failure(2, "bad.conll:3: no label", False), 1: _Failure(-15, "bad.conll:3: no label", False)})
    assert str(data_error) == "bad.conll:3: no label" and data_error.exit_code == 2
    killed = _describe_failure({0: _Failure(1, "rank 0 lost contact", True), 1: _Failure(-9)})
    assert str(killed).startswith("worker rank 1 (pid 91) was killed by SIGKILL") and killed.exit_code == 1
    lost = _describe_failure({0: _Failure(1, "rank 0 lost contact", True), 1: _Failure(-15)})
    assert str(lost) == "rank 0 lost contact"


def test_classify_with_2_devices_equals_1_device(tmp_path: Path) -> None:
    """The same launcher, sharding and gathering serve text classification."""
    words = {"positive": ["good", "great", "fine"], "negative": ["bad", "awful", "poor"]}
    rows = ["text,label"] + [f"the film was {words[label][i % 3]} {'really ' * (i % 4)}.,{label}"
                             for i in range(24) for label in ("positive", "negative")]
    data = tmp_path / "reviews.csv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    model = tmp_path / "cls-model"
    assert main(["cls", "train", "--train", str(data), "--output", str(model), "--max-epoch", "2", "--hidden", "8",
                 "--dense-size", "8", "--word-dim", "8", "--batch-size", "8"]) == 0
    one = tmp_path / "one.json"
    common = ["cls", "classify", "--model", str(model), "--input", str(data), "--batch-size", "5", "--threads", "1"]
    assert main([*common, "--output", str(one)]) == 0
    two = _cli([*common, "--devices", "2"])
    assert len(json.loads(two.stdout)["classifications"]) == 48
    # stdout streams: runtime follows the list there (see the tagging test above)
    assert _without_volatile(two.stdout)[:-2] == _without_volatile(one.read_text(encoding="utf-8"))[:-2]
    streamed, whole = json.loads(two.stdout), json.loads(one.read_text(encoding="utf-8"))
    for document in (streamed, whole):
        document.pop("date"), document.pop("runtime")
    assert streamed == whole


def _padding_fill(lengths: np.ndarray, batches: list[list[int]]) -> float:
    return float(sum(lengths[b].sum() for b in batches) / sum(lengths[b].max() * len(b) for b in batches))


def test_bucket_batches_trades_padding_for_randomness() -> None:
    lengths = np.random.default_rng(0).integers(1, 60, size=2000)
    fills = {}
    for bucket_batches in (1, 10, 50):
        batches = bucketed_batches(lengths, 16, 7, 1, bucket_batches)
        assert sorted(i for b in batches for i in b) == list(range(2000))
        assert all(len(b) == 16 for b in batches)  # buckets are whole batches, 2000 = 125 x 16
        fills[bucket_batches] = _padding_fill(lengths, batches)
    assert fills[1] < 0.6 < fills[10] < fills[50]
    # one batch per bucket: each batch is a slice of the epoch's permutation, kept as drawn
    permutation = np.random.default_rng([7, 1]).permutation(2000)
    unbucketed = bucketed_batches(lengths, 16, 7, 1, 1)
    assert sorted(map(sorted, unbucketed)) == sorted(sorted(permutation[i : i + 16].tolist()) for i in range(0, 2000, 16))


def test_bucket_batches_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="--bucket-batches must be >= 1"):
        TrainConfig(bucket_batches=0)
