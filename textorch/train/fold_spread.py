"""``--fold-parallel``: n-fold training with whole folds dealt to the processes.

With ``--devices N`` an n-fold run can use its N processes in two ways: train each fold in
turn on all N (data parallel, a gradient all-reduce at every step), or give each process whole
folds, fold ``i`` to rank ``i mod N``, trained alone as a one-process run trains them. A fold is
small, so the second usually wins: no traffic while training, and close to N times faster when
the fold count is a multiple of N. It also gives every fold the model one process would give it
(bit for bit on CPU with the same threads per process), since each fold's seeds depend on its
index only; data-parallel training adds up gradients in another order.

This module decides which way a run goes and carries the folds' results between processes:
small per-fold records by an all-gather, a trained model as the bytes of its model directory
(which works across machines, where a folder on one machine's disk would not).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from textorch.errors import ConfigError

if TYPE_CHECKING:  # the option's check runs at parse time, before (and without) torch
    from textorch.train.dist import DistContext

logger = logging.getLogger(__name__)

T = TypeVar("T")

FOLD_PARALLEL_MODES = ("auto", "true", "false")

FOLD_WAIT = timedelta(days=7)
"""How long a process that has trained its folds waits for the others'. A fold may legitimately
train for hours, far beyond ``TEXTORCH_DIST_TIMEOUT`` (which bounds a wait inside a training
step), so the exchange uses its own process group with this limit. A worker that fails still
ends the run at once: the launcher stops every worker when one exits with an error."""


def check_fold_parallel(mode: str, fold_count: int) -> None:
    """Refuse an unknown mode, and ``true`` where there are no folds to spread."""
    if mode not in FOLD_PARALLEL_MODES:
        raise ConfigError(f"--fold-parallel must be one of {', '.join(FOLD_PARALLEL_MODES)}, got {mode!r}")
    if mode == "true" and fold_count < 2:
        raise ConfigError("--fold-parallel true needs --fold-count 2 or more (it spreads folds over the processes)")


def spread_folds(mode: str, fold_count: int, world_size: int) -> bool:
    """Whether a run of ``world_size`` processes deals whole folds to them.

    ``auto`` does so when every process gets at least one fold (``fold_count >= world_size``);
    with fewer folds than processes, data-parallel folds keep every device busy instead.
    """
    check_fold_parallel(mode, fold_count)
    if world_size < 2 or fold_count < 2 or mode == "false":
        return False
    return mode == "true" or fold_count >= world_size


def folds_of(rank: int, world_size: int, fold_count: int) -> list[int]:
    """Folds (0-based) that ``rank`` trains: ``rank``, ``rank + world_size``, ... (none when ``rank >= fold_count``)."""
    return list(range(rank, fold_count, world_size))


class FoldExchange:
    """The folds of this process and the collectives that bring every fold's results together.

    Every process must make the same calls in the same order (they are collectives).
    """

    def __init__(self, ctx: DistContext, fold_count: int, group: Any) -> None:
        self.ctx, self.fold_count, self.group = ctx, fold_count, group
        self.mine = folds_of(ctx.rank, ctx.world_size, fold_count)

    def owner(self, fold: int) -> int:
        """The rank that trains ``fold``."""
        return fold % self.ctx.world_size

    def describe(self) -> str:
        """One log line: who trains what."""
        idle = max(self.ctx.world_size - self.fold_count, 0)
        return (f"n-fold: {self.fold_count} folds spread over {self.ctx.world_size} processes, fold i on rank "
                f"(i - 1) mod {self.ctx.world_size}" + (f"; {idle} process(es) have no fold and wait" if idle else ""))

    def gather(self, mine: dict[int, T]) -> list[T]:
        """Every fold's result, in fold order, on every process (``mine``: this process's, by fold)."""
        parts: list[dict[int, T] | None] = [None] * self.ctx.world_size
        import torch.distributed as torch_dist

        torch_dist.all_gather_object(parts, mine, group=self.group)
        merged: dict[int, T] = {}
        for part in parts:
            merged.update(part or {})
        missing = [i + 1 for i in range(self.fold_count) if i not in merged]
        if missing:
            raise RuntimeError(f"n-fold: no result for fold(s) {missing} from their processes")
        return [merged[i] for i in range(self.fold_count)]

    def broadcast(self, value: T | None, src: int) -> T:
        """``value`` of rank ``src`` on every process (pickled: tensors must be on the CPU)."""
        box: list[Any] = [value]
        import torch.distributed as torch_dist

        torch_dist.broadcast_object_list(box, src=src, group=self.group)
        return box[0]

    @contextmanager
    def shared_directory(self, owner: int, write: Callable[[Path], object] | None) -> Iterator[Path]:
        """A directory that rank ``owner`` writes with ``write(path)``, copied to every process.

        Each process gets it in a private temporary folder, removed afterwards; the bytes travel
        over the process group, so no file system needs to be shared.
        """
        with tempfile.TemporaryDirectory(prefix="textorch-fold-") as scratch:
            target = Path(scratch) / "model"
            files: dict[str, bytes] | None = None
            if self.ctx.rank == owner:
                assert write is not None, "the owner of the directory must write it"
                write(target)
                files = {p.relative_to(target).as_posix(): p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()}
            files = self.broadcast(files, owner)
            if self.ctx.rank != owner:
                for name, content in files.items():
                    path = target / name
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(content)
            yield target


@contextmanager
def fold_exchange(ctx: DistContext, fold_count: int) -> Iterator[FoldExchange]:
    """A :class:`FoldExchange` over a gloo group of all processes, waiting up to :data:`FOLD_WAIT`.

    gloo whatever the training backend: the results are pickled objects on the CPU.
    """
    import torch.distributed as torch_dist

    group = torch_dist.new_group(backend="gloo", timeout=FOLD_WAIT)
    exchange = FoldExchange(ctx, fold_count, group)
    logger.info(exchange.describe())
    yield exchange
    # Only on success: after an error the session takes every group down with the default one.
    torch_dist.destroy_process_group(group)
