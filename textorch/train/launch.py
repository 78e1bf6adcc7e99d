"""``--devices N``: run the same command again as N worker processes under PyTorch's launcher.

The command line the user typed is handed unchanged to ``torch.distributed.run`` (the engine
behind ``torchrun``), which starts the workers; each worker sees ``RANK``/``WORLD_SIZE`` in its
environment, so it does not launch again but joins the process group
(:func:`textorch.train.dist.session`). The same commands therefore also run under an
external ``torchrun`` or a SLURM ``srun``, where this module does nothing.

On one machine the rendezvous is ``--standalone``: a free port is chosen, so parallel runs
never collide. With ``--nnodes M`` every machine runs the same command with its own
``--node-rank`` and the address of node 0 as ``--rdzv-endpoint``.

Failures: the launcher stops every worker as soon as one exits with an error or is killed
(polling every 0.1 s), and this process exits non-zero with one line per distinct cause.
Workers started here report a :class:`~textorch.errors.TextorchError` through the
launcher's error file instead of printing it, so a data error is printed once, not N times.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from textorch.errors import ConfigError, TextorchError
from textorch.train.dist import available_cores, under_launcher

logger = logging.getLogger(__name__)

ENV_LAUNCHED = "TEXTORCH_LAUNCHED"
"""Set in workers started by ``--devices``: they report errors to the launcher, not stderr."""


class WorkerFailure(TextorchError):
    """One or more worker processes failed; ``exit_code`` is what the command returns."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_distributed_options(parser: argparse.ArgumentParser) -> None:
    """``--devices``, ``--nnodes``, ``--node-rank``, ``--rdzv-endpoint`` (shared by every task)."""
    parser.add_argument("--devices", type=int, default=1,
                        help="worker processes on this machine, one per GPU with --device cuda (default: 1)")
    parser.add_argument("--nnodes", type=int, default=1, help="machines taking part (default: 1)")
    parser.add_argument("--node-rank", type=int, default=None,
                        help="this machine's index, 0 .. nnodes-1 (default: $SLURM_NODEID or 0)")
    parser.add_argument("--rdzv-endpoint", default=None,
                        help="HOST:PORT of node 0, where the machines meet (required with --nnodes > 1)")


def _check(devices: int, nnodes: int, node_rank: int, endpoint: str | None, device: str) -> None:
    if devices < 1:
        raise ConfigError(f"--devices must be >= 1, got {devices}")
    if nnodes < 1:
        raise ConfigError(f"--nnodes must be >= 1, got {nnodes}")
    if not 0 <= node_rank < nnodes:
        raise ConfigError(f"--node-rank must be in 0..{nnodes - 1}, got {node_rank}")
    if nnodes > 1 and not endpoint:
        raise ConfigError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address and a free port)")
    if endpoint and (":" not in endpoint or not endpoint.rsplit(":", 1)[1].isdigit()):
        raise ConfigError(f"--rdzv-endpoint must be HOST:PORT, got {endpoint!r}")
    if device == "cuda" or (device == "auto" and devices > 1):  # one process on "auto" has nothing to refuse
        import torch

        available = torch.cuda.device_count()
        if device == "auto" and not available:
            return  # CPU processes: any number
        if devices > available:
            raise ConfigError(f"--devices {devices} with --device cuda, but this machine has {available} GPU(s)")


def torchrun_arguments(
    argv: list[str], devices: int, nnodes: int = 1, node_rank: int = 0, endpoint: str | None = None
) -> list[str]:
    """The ``torchrun`` command line (without the program name) that re-runs ``argv``."""
    if nnodes == 1 and not endpoint:
        placement = ["--standalone"]
    else:
        # Static rendezvous: node ranks are the ones given, so global rank 0 (which writes
        # the model) is on node 0, whose address is the endpoint.
        placement = ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--rdzv-endpoint", str(endpoint)]
    return [*placement, "--nproc-per-node", str(devices), "--max-restarts", "0",
            "--monitor-interval", "0.1", "-m", "textorch.cli.main", *argv]


def launch_if_requested(args: argparse.Namespace, argv: list[str]) -> int | None:
    """Run ``argv`` as workers when ``--devices``/``--nnodes`` ask for it; None: run here.

    Returns the exit code of the whole run. Inside a worker (or under an external launcher)
    this always returns None, whatever ``--devices`` says: the environment is the authority.
    """
    devices = getattr(args, "devices", None)
    if devices is None or under_launcher():
        return None
    nnodes = int(getattr(args, "nnodes", 1) or 1)
    node_rank = args.node_rank if args.node_rank is not None else int(os.environ.get("SLURM_NODEID", 0))
    endpoint = getattr(args, "rdzv_endpoint", None)
    _check(devices, nnodes, node_rank if nnodes > 1 else 0, endpoint, getattr(args, "device", "cpu"))
    if devices == 1 and nnodes == 1:
        return None
    threads = getattr(args, "threads", None) or max(available_cores() // devices, 1)
    if nnodes > 1:
        logger.info("node %d of %d: starting %d worker(s), meeting at %s", node_rank, nnodes, devices, endpoint)
    else:
        logger.info("starting %d workers, %d CPU thread(s) each", devices, threads)
    run_args = torchrun_arguments(argv, devices, nnodes, node_rank, endpoint)
    _run_torchrun(run_args, threads, verbose=bool(getattr(args, "verbose", False)))
    return 0


def _run_torchrun(run_args: list[str], threads: int, verbose: bool) -> None:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser
    from torch.distributed.run import run as torchrun

    # The launcher's per-run folder (workers' error files) would otherwise stay in /tmp.
    log_dir = tempfile.mkdtemp(prefix="textorch-launch-")
    parsed = get_args_parser().parse_args(["--log-dir", log_dir, *run_args])
    with _worker_environment(threads), _quiet_launcher(verbose):
        try:
            torchrun(parsed)
        except ChildFailedError as exc:
            raise _describe_failure(exc.failures) from None
        except SignalException as exc:
            logger.debug("launcher received %s; workers stopped", exc.sigval)
            raise KeyboardInterrupt from None
        finally:
            shutil.rmtree(log_dir, ignore_errors=True)


def _describe_failure(failures: dict) -> WorkerFailure:
    """One line per distinct root cause.

    In order of preference: errors the workers reported themselves; workers that died (a
    signal other than the launcher's SIGTERM, or an exit code); workers that only lost
    contact with a dead one; and last, the workers the launcher stopped.
    """
    import signal

    reported, secondary, died, stopped = [], [], [], []
    codes = set()
    for rank in sorted(failures):
        failure = failures[rank]
        data = failure.error_file_data
        if data.get("textorch"):
            target = secondary if data.get("secondary") else reported
            if str(failure.message) not in target:
                target.append(str(failure.message))
            codes.add(failure.exitcode)
            continue
        how = f"was killed by {failure.signal_name()}" if failure.exitcode < 0 else f"failed with exit code {failure.exitcode}"
        line = f"worker rank {rank} (pid {failure.pid}) {how}; the other workers were stopped"
        (stopped if failure.exitcode == -signal.SIGTERM else died).append(line)
    if reported:
        # A worker that reported its error may still be stopped (SIGTERM) while exiting.
        return WorkerFailure("\ntextorch: error: ".join(reported), 2 if 2 in codes else 1)
    return WorkerFailure("\ntextorch: error: ".join(died or secondary or stopped), 1)


def in_launched_worker() -> bool:
    """True in a worker process started by ``--devices`` (not under an external launcher)."""
    return bool(os.environ.get(ENV_LAUNCHED)) and under_launcher()


def report_worker_error(exc: TextorchError) -> bool:
    """In a worker started by ``--devices``, hand the error to the launcher; True if done.

    The launcher reads the error file of each failed worker and prints each distinct message
    once. Elsewhere (one process, external torchrun) the caller prints it itself.
    """
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not in_launched_worker() or not path:
        return False
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": str(exc), "timestamp": int(time.time()), "textorch": True,
                       "secondary": bool(getattr(exc, "secondary", False))}, handle)
    except OSError:
        return False
    return True


@contextmanager
def _worker_environment(threads: int) -> Iterator[None]:
    """Variables the workers inherit; restored afterwards so an in-process caller is unaffected."""
    saved = dict(os.environ)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ[ENV_LAUNCHED] = "1"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class _ToDebug(logging.Handler):
    """Re-emit the launcher's own records at debug level under ``textorch``."""

    def emit(self, record: logging.LogRecord) -> None:
        logger.debug("torch launcher: %s", record.getMessage())


@contextmanager
def _quiet_launcher(verbose: bool) -> Iterator[None]:
    """The launcher logs every failure as a long report; we print one line instead.

    With ``-v`` its messages still appear, as debug records of ``textorch.train.launch``.
    """
    torch_logger = logging.getLogger("torch.distributed")
    saved = (torch_logger.handlers[:], torch_logger.propagate)
    torch_logger.handlers[:] = [_ToDebug()] if verbose else [logging.NullHandler()]
    torch_logger.propagate = False
    try:
        yield
    finally:
        torch_logger.handlers[:], torch_logger.propagate = saved
