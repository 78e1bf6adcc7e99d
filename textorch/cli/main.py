"""``textorch`` entry point: parse, dispatch, and turn library errors into one-line messages."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from textorch import __version__
from textorch.cli.commands import GROUPS, named_group
from textorch.errors import TextorchError
from textorch.runtime.collector import collector_paused
from textorch.runtime.malloc_tuning import bound_heap_growth, keep_freed_memory


def _build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of every group; only the group ``argv`` names is built in full (its module
    imported), the others hold their help line (:mod:`textorch.cli.commands`): a tagging
    command then imports what tagging needs and nothing of training, the server or the demo."""
    parser = argparse.ArgumentParser(
        prog="textorch",
        description="Sequence labelling and text classification with PyTorch, on one CPU, one GPU or many.",
    )
    parser.add_argument("--version", action="version", version=f"textorch {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--tune-allocator", action="store_true",
                        help="this process only: let glibc keep freed memory for the next call (steadier tagging "
                             "times, a few %% faster; see textorch/runtime/malloc_tuning.py and docs/performance.md)")
    parser.add_argument("--pause-collector", action="store_true",
                        help="this process only: no cyclic garbage collection while the command runs (long tagging "
                             "runs over short sequences are faster; memory in reference cycles is freed at the end; "
                             "see textorch/runtime/collector.py)")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    wanted = GROUPS.get(named_group(argv) or "", ("", ""))[0]
    for name, (module, help_line) in GROUPS.items():
        if module != wanted:
            groups.add_parser(name, help=help_line)
        elif name not in groups.choices:  # the module registers all its groups at once
            importlib.import_module(module).register(groups)
    return parser


def _configure_logging(verbose: bool) -> None:
    """Logging to stderr so stdout carries results only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    root = logging.getLogger("textorch")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def main(argv: list[str] | None = None) -> int:
    code = _run_command(argv)
    from textorch.train.dist import end_group_process, joined_a_group

    if joined_a_group():  # a worker of a multi-process run: see end_group_process
        end_group_process(code)
    return code


def _run_command(argv: list[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = _build_parser(arguments).parse_args(arguments)
    _configure_logging(args.verbose)
    if args.tune_allocator:  # a process setting: asked for, never the default
        keep_freed_memory()
    elif _trains(args):  # a training process's memory stays bounded (see bound_heap_growth)
        bound_heap_growth()
    from textorch.train import launch

    try:
        with sigterm_as_interrupt(not getattr(args, "handles_sigterm", False)):
            # --devices N / --nnodes M: re-run this command line as worker processes.
            code = launch.launch_if_requested(args, arguments)
            if code is not None:
                return code
            with collector_paused() if args.pause_collector else nullcontext():  # asked for, never the default
                return int(args.run(args) or 0)
    except TextorchError as exc:
        if not launch.report_worker_error(exc):  # a worker hands it to its launcher instead
            print(f"textorch: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        if not launch.in_launched_worker():  # the launcher says it once for all workers
            print("textorch: interrupted", file=sys.stderr)
        return 130


def _trains(args: argparse.Namespace) -> bool:
    """Whether the command trains a model: ``seq``/``cls`` ``train`` and ``train-eval`` say so
    themselves, the applications (``grobid``, ``ner``) by their action."""
    return bool(getattr(args, "trains", False)) or getattr(args, "action", None) in ("train", "train-eval")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt(wanted: bool = True) -> Iterator[None]:
    """For the duration of a command, SIGTERM (what ``timeout``, systemd, docker and Slurm send)
    stops it as Ctrl-C does: a ``KeyboardInterrupt``, so a streamed output keeps what was
    written as ``OUTPUT.partial`` and its temporary file is removed, and the command says
    ``textorch: interrupted`` and exits with 130. The previous handler comes back afterwards
    (a library changes no process-wide state unasked).

    Left as it is: off the main thread (where no handler can be set), in the workers of a
    multi-process run (their launcher stops them with SIGTERM and tells their ends apart by
    it), and for a command that handles SIGTERM itself (``serve``: a graceful shutdown).
    """
    from textorch.train.dist import under_launcher

    if not wanted or threading.current_thread() is not threading.main_thread() or under_launcher():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
