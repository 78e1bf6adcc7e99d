"""Process-group facts, read once from the environment set by ``torchrun`` / SLURM.

With one process everything here is a no-op, so the trainer and evaluator run the same code
on a laptop CPU, one GPU or many. :func:`session` is the one place where a process group is
created and destroyed: commands run inside it and receive the context and their device.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import torch

from textorch.errors import ConfigError, TextorchError

logger = logging.getLogger(__name__)


def _torch_dist():
    """``torch.distributed``, imported on first use: a one-process command that runs no PyTorch
    network (tagging with ONNX Runtime) reads its rank facts here without importing torch."""
    import torch.distributed

    return torch.distributed

ENV_TIMEOUT = "TEXTORCH_DIST_TIMEOUT"
"""Seconds a collective may wait for a missing process before failing (default 1800)."""

_DEFAULT_TIMEOUT_S = 1800.0


class LostPeer(TextorchError):
    """A collective failed because another process died or stopped answering.

    ``secondary``: the dead process's own failure is the cause to report, not this.
    """

    secondary = True


def _is_comm_failure(exc: BaseException) -> bool:
    """Gloo raises plain RuntimeErrors; NCCL and the stores raise ``DistError`` subclasses."""
    if isinstance(exc, getattr(_torch_dist(), "DistError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("gloo" in text or "Connection closed by peer" in text or "Timed out" in text)


@dataclass(frozen=True)
class DistContext:
    """Rank facts of this process; ``world_size == 1`` means a plain single-process run."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    quiet: bool = False
    """Show no progress bars: a one-process job of a process other than rank 0 (a fold that
    ``--fold-parallel`` gave it), whose bars would garble rank 0's on the same terminal."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_local_main(self) -> bool:
        return self.local_rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1 and _torch_dist().is_available() and _torch_dist().is_initialized()

    @property
    def shows_progress(self) -> bool:
        """Whether this process draws progress bars (rank 0 only, and not when told to be quiet)."""
        return self.is_main and not self.quiet

    def alone(self) -> "DistContext":
        """A one-process context for work this process does by itself, without collectives.

        Used for the folds ``--fold-parallel`` deals to each process: they train like a
        single-process run (so a fold gives the same model on whichever rank it runs), but only
        rank 0 shows progress.
        """
        return DistContext(quiet=not self.shows_progress)

    def barrier(self) -> None:
        if self.enabled:
            _torch_dist().barrier()

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum a tensor over all processes (in place, and returned); identity with one process."""
        if self.enabled:
            _torch_dist().all_reduce(tensor, op=_torch_dist().ReduceOp.SUM)
        return tensor

    def all_gather_objects(self, value: Any) -> list[Any]:
        """Every process's ``value``, in rank order (pickled: for small results, not tensors)."""
        if not self.enabled:
            return [value]
        gathered: list[Any] = [None] * self.world_size
        _torch_dist().all_gather_object(gathered, value)
        return gathered

    @contextmanager
    def local_main_first(self) -> Iterator[None]:
        """Run the body on each machine's first process, then on the others.

        For work that fills a per-machine cache (the embeddings LMDB): one process builds it,
        the rest open the finished copy instead of parsing the same file in parallel.
        """
        if not self.is_local_main:
            self.barrier()
        yield
        if self.is_local_main:
            self.barrier()


def _slurm_context(env: os._Environ | dict) -> DistContext | None:
    """A context from ``srun``'s per-step variables, or None outside a multi-task ``srun`` step.

    The *step* variables are used, not ``SLURM_NTASKS``: a batch script that runs textorch
    directly (without ``srun``) inside a 4-task allocation is one process, not rank 0 of 4.
    """
    if "SLURM_STEP_NUM_TASKS" not in env or "SLURM_PROCID" not in env:
        return None
    world = int(env["SLURM_STEP_NUM_TASKS"])
    if world <= 1:
        return None
    nodes = max(int(env.get("SLURM_STEP_NUM_NODES", 1)), 1)
    return DistContext(int(env["SLURM_PROCID"]), int(env.get("SLURM_LOCALID", 0)), world, -(-world // nodes))


def context_from_env() -> DistContext:
    """Rank and world size from torchrun's variables, falling back to SLURM's, else single."""
    env = os.environ
    if "WORLD_SIZE" in env and "RANK" in env:
        world = int(env["WORLD_SIZE"])
        return DistContext(int(env["RANK"]), int(env.get("LOCAL_RANK", 0)), world, int(env.get("LOCAL_WORLD_SIZE", world)))
    return _slurm_context(env) or DistContext()


def under_launcher() -> bool:
    """True inside a process started by torchrun / ``--devices`` / a multi-task ``srun``."""
    return context_from_env().world_size > 1


def resolve_device(requested: str, ctx: DistContext) -> torch.device:
    """``auto`` picks CUDA when present; each process takes the GPU of its local rank."""
    import torch

    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda: no CUDA device is available (use --device cpu or auto)")
        return torch.device("cuda", ctx.local_rank % torch.cuda.device_count())
    if requested != "cpu":
        raise ConfigError(f"unknown --device {requested!r}; choose one of: cpu, cuda, auto")
    return torch.device("cpu")


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, which SLURM and taskset restrict)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def threads_per_worker(ctx: DistContext) -> int:
    """CPU threads for one process: the machine's cores shared among the processes on it.

    More threads than cores oversubscribe them: the workers' threads then wait on each other and
    training runs many times slower, so each process gets its share of the cores (at least
    one). Under SLURM, ``--cpus-per-task`` is already per process.
    """
    if "SLURM_CPUS_PER_TASK" in os.environ and _slurm_context(os.environ) is not None:
        return max(int(os.environ["SLURM_CPUS_PER_TASK"]), 1)
    return max(available_cores() // max(ctx.local_world_size, 1), 1)


def _timeout() -> timedelta:
    raw = os.environ.get(ENV_TIMEOUT)
    try:
        seconds = float(raw) if raw else _DEFAULT_TIMEOUT_S
    except ValueError:
        raise ConfigError(f"${ENV_TIMEOUT}={raw!r}: expected a number of seconds") from None
    return timedelta(seconds=seconds)


def _init_method(ctx: DistContext) -> str:
    """``env://`` under torchrun; under SLURM an address derived from the job (no variables set)."""
    env = os.environ
    if "MASTER_ADDR" in env and "MASTER_PORT" in env:
        return "env://"
    host = env.get("MASTER_ADDR") or env.get("SLURM_LAUNCH_NODE_IPADDR")
    if not host:
        raise ConfigError("distributed run without MASTER_ADDR: export MASTER_ADDR (and MASTER_PORT) to the first node's address")
    # A port derived from the job id keeps two jobs sharing a node from colliding.
    port = env.get("MASTER_PORT") or str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000)
    return f"tcp://{host}:{port}"


_joined_a_group = False


def joined_a_group() -> bool:
    """Whether this process has joined a process group (:func:`session`): it must then end
    through :func:`end_group_process`."""
    return _joined_a_group


def end_group_process(code: int) -> NoReturn:
    """End a process that took part in a process group: exit handlers run and output is
    flushed, then the process leaves without interpreter finalization (``os._exit``).

    Seen twice in 200-odd runs of the two-node test: a worker that had finished its work (model
    saved by rank 0, final barrier passed, process group destroyed) died at exit with
    "terminate called without an active exception" (SIGABRT), and its launcher reported the
    run as failed. ``destroy_process_group`` only forgets the group; DDP's reducer keeps the
    C++ object alive, so it was freed during interpreter finalization, where a native thread
    that releases a Python object can no longer take the interpreter lock and is ended in a way
    C++ turns into ``std::terminate``. Skipping finalization leaves nothing to free at that
    point; the sockets close with the process. Everything a command writes is complete by then
    (model directories are renamed into place, files are closed)."""
    atexit._run_exitfuncs()  # logging's shutdown (flushes handlers), temporary directories
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken pipe: nothing more can be said
            pass
    os._exit(code)


@contextmanager
def session(device: str = "cpu", threads: int | None = None) -> Iterator[tuple[DistContext, torch.device]]:
    """Join the process group when launched as one of several processes; leave it cleanly.

    Yields the context and this process's device. ``threads`` (``--threads``) overrides the
    per-worker share of the cores. The group is destroyed on success, error and Ctrl-C alike,
    so no process exits with a leaked-resource warning.
    """
    import torch

    torch_dist = _torch_dist()
    ctx = context_from_env()
    if threads:
        torch.set_num_threads(threads)
    elif ctx.world_size > 1 and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(threads_per_worker(ctx))
    dev = resolve_device(device, ctx)
    if ctx.world_size > 1 and not torch_dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        torch_dist.init_process_group(
            backend, init_method=_init_method(ctx), rank=ctx.rank, world_size=ctx.world_size, timeout=_timeout()
        )
        global _joined_a_group
        _joined_a_group = True
        logger.debug("rank %d/%d joined (%s, %s, %d threads)", ctx.rank, ctx.world_size, backend, dev, torch.get_num_threads())
    # Only rank 0 reports progress; warnings and errors still come from every process, except
    # the data warnings: every process reads the same files, so rank 0 alone reports those.
    textorch_logger, data_logger = logging.getLogger("textorch"), logging.getLogger("textorch.data")
    saved_level, saved_data_level = textorch_logger.level, data_logger.level
    if not ctx.is_main:
        textorch_logger.setLevel(max(saved_level, logging.WARNING))
        data_logger.setLevel(max(saved_data_level, logging.ERROR))
    try:
        yield ctx, dev
    except Exception as exc:
        if ctx.world_size > 1 and _is_comm_failure(exc):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LostPeer(f"rank {ctx.rank} lost contact with the other processes ({first[:300]})") from None
        raise
    finally:
        textorch_logger.setLevel(saved_level)
        data_logger.setLevel(saved_data_level)
        if torch_dist.is_available() and torch_dist.is_initialized():
            torch_dist.destroy_process_group()
