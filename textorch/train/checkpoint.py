"""Checkpoints of one training loop: written atomically, the last K kept, the newest found again.

A checkpoint is a directory named after the position training continues from
(``e00003-s00000012``: epoch 3, after 12 optimizer steps of it) holding

* ``state.pt``: tensors and plain values only (model and best weights, optimizer, scheduler,
  gradient scaler, every process's random-number states, the partial epoch's loss sums),
  written by ``torch.save`` and read back with ``torch.load(weights_only=True)``, which
  refuses anything but tensors and plain containers: no code runs when a checkpoint is read;
* ``checkpoint.json``: the position, the early-stopping state, the epoch history, the run
  description it belongs to (options and data checksums, see :mod:`textorch.train.resume`)
  and the SHA-256 of ``state.pt``.

When training ends, a ``final`` checkpoint holds the final weights and the training result,
so a run killed between training and saving the model does not train again.

Writing: rank 0 writes into ``.tmp-*`` in the same directory, fsyncs, and renames; a kill at
any moment leaves either the complete checkpoint or none under its name. Old checkpoints are
renamed aside before they are deleted, for the same reason. Every process then waits at a
barrier, so none runs ahead of a checkpoint that may be needed to resume it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from textorch import __version__
from textorch.errors import TextorchError
from textorch.runtime.write_errors import torch_save
from textorch.train.dist import DistContext
from textorch.train.rng_state import capture_rng

from textorch.train.records import EpochRecord, Progress, TrainingResult

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
META_FILE = "checkpoint.json"
STATE_FILE = "state.pt"
FINAL = "final"
_POSITION = re.compile(r"^e(\d+)-s(\d+)$")


class CheckpointError(TextorchError):
    """A checkpoint cannot be written or read, or belongs to another run."""


@dataclass
class Snapshot:
    """One checkpoint read back: ``meta`` from the JSON file, ``state`` from ``state.pt``."""

    path: Path
    meta: dict
    state: dict = field(repr=False)

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))


def checkpoint_name(epoch: int, step: int) -> str:
    return f"e{epoch:05d}-s{step:08d}"


def _order_key(name: str) -> tuple[int, int, int] | None:
    """Sort key, newest last; None for names that are not checkpoints."""
    if name == FINAL:
        return (1, 0, 0)
    match = _POSITION.match(name)
    return (0, int(match.group(1)), int(match.group(2))) if match else None


def list_checkpoints(directory: Path) -> list[Path]:
    """Complete checkpoint directories (renamed into place), oldest first."""
    if not directory.is_dir():
        return []
    found = [(key, path) for path in directory.iterdir() if path.is_dir() and (key := _order_key(path.name)) is not None]
    return [path for _, path in sorted(found)]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def run_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Human-readable differences between two run descriptions (nested dicts), key by key."""
    lines = []
    for key in sorted(set(saved) | set(current)):
        name = f"{prefix}{key}"
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            lines += run_differences(a, b, name + ".")
        elif a != b:
            if key == "sha256":
                lines.append(f"{prefix.rstrip('.')} has changed (different content)")
            else:
                lines.append(f"{name} was {a!r}, is now {b!r}")
    return lines


# --------------------------------------------------------------------- the checkpointer
class Checkpointer:
    """Writes the checkpoints of one training loop into ``directory`` and reads them back.

    Args:
        directory: where this loop's checkpoints go (created on the first write).
        run: description of the run (options, data checksums); a checkpoint of another run
            is refused on resume, with the differences listed.
        run_sha256: checksum of ``run``, compared first.
        keep_last: in-progress checkpoints kept (the oldest are deleted); the final one stays.
        every_steps: also checkpoint every N optimizer steps (0: at epoch ends only).
        resume: read the newest checkpoint at the start of training.
        also_read: further directories searched on resume (where finished runs keep theirs).
        info: recorded in ``checkpoint.json`` but not compared (the command line, file paths).
    """

    def __init__(
        self,
        directory: str | Path,
        run: dict,
        run_sha256: str,
        keep_last: int = 2,
        every_steps: int = 0,
        resume: bool = False,
        also_read: Sequence[str | Path] = (),
        info: dict | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.run = run
        self.run_sha256 = run_sha256
        self.keep_last = keep_last
        self.every_steps = every_steps
        self.resume = resume
        self.also_read = [Path(p) for p in also_read]
        self.info = info or {}

    # ------------------------------------------------------------------ writing
    def due(self, global_step: int) -> bool:
        """A step checkpoint after this many optimizer steps in all (epoch ends are always saved)."""
        return self.every_steps > 0 and global_step % self.every_steps == 0

    def save(self, ctx: DistContext, device: torch.device, trainer_state: dict, progress: "Progress",
             totals: torch.Tensor | None = None) -> None:
        """Checkpoint at ``progress``'s position; collective: every process calls it at the same step.

        ``trainer_state``: what :meth:`Trainer.state_dict` gives (model, optimizer, scheduler,
        scaler); ``totals``: this process's loss/sequence/token sums of the unfinished epoch.
        """
        rng = ctx.all_gather_objects(capture_rng(device))
        partial = torch.zeros(3, dtype=torch.float64) if totals is None else totals.clone()
        partial = ctx.all_reduce_sum(partial.to(device)).cpu()
        if ctx.is_main:
            state = {
                "model": trainer_state["model"],
                "best_model": progress.best_state,
                "optimizer": trainer_state["optimizer"],
                "scheduler": trainer_state["scheduler"],
                "scaler": trainer_state["scaler"],
                "rng": rng,
                "partial_epoch_totals": partial,
            }
            result = progress.result
            meta = {
                "complete": False,
                "position": {"epoch": progress.epoch, "step": progress.step, "global_step": progress.global_step},
                "early_stopping": {"best_score": result.best_score, "best_epoch": result.best_epoch,
                                   "epochs_without_gain": progress.epochs_without_gain},
                "history": [asdict(r) for r in result.history],
                "train_seconds": progress.elapsed_s,
                "total_tokens": progress.total_tokens,
            }
            self._write(checkpoint_name(progress.epoch, progress.step), meta, state)
            self._prune()
        ctx.barrier()

    def save_final(self, ctx: DistContext, model_state: dict, result: "TrainingResult") -> None:
        """The final weights and the result, so that a resumed run need not train again."""
        if ctx.is_main:
            meta = {"complete": True, "result": {**asdict(result), "history": [asdict(r) for r in result.history]}}
            self._write(FINAL, meta, {"model": model_state})
        ctx.barrier()

    def _write(self, name: str, meta: dict, state: dict) -> None:
        tmp = self.directory / f".tmp-{name}-{uuid.uuid4().hex[:8]}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
            torch_save(state, tmp / STATE_FILE)  # a full disk: the OSError, not torch's "unexpected pos"
            full = {
                "format_version": FORMAT_VERSION,
                "textorch_version": __version__,
                "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                **meta,
                "run_sha256": self.run_sha256,
                "run": self.run,
                "info": self.info,
                "state_sha256": sha256_file(tmp / STATE_FILE),
            }
            (tmp / META_FILE).write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
            for path in (tmp / STATE_FILE, tmp / META_FILE):
                with open(path, "rb") as handle:
                    os.fsync(handle.fileno())
            target = self.directory / name
            if target.exists():
                _discard(target)
            os.rename(tmp, target)
            _fsync_directory(self.directory)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise CheckpointError(f"{self.directory}: cannot write checkpoint {name} ({exc.strerror or exc})") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        logger.debug("checkpoint %s written", target)

    def _prune(self) -> None:
        """Keep the newest ``keep_last`` in-progress checkpoints; remove leftovers of killed writes."""
        in_progress = [p for p in list_checkpoints(self.directory) if p.name != FINAL]
        for old in in_progress[: max(len(in_progress) - self.keep_last, 0)]:
            try:
                _discard(old)
            except OSError as exc:
                raise CheckpointError(f"{old}: cannot remove this old checkpoint ({exc.strerror or exc})") from None
        for pattern in (".tmp-*", ".trash-*"):  # what a kill during a write or a removal left
            for leftover in self.directory.glob(pattern):
                shutil.rmtree(leftover, ignore_errors=True)

    # ------------------------------------------------------------------ reading
    def restore(self, ctx: DistContext) -> Snapshot | None:
        """The newest usable checkpoint, read by every process; None when not resuming or none exists.

        Rank 0 chooses (skipping damaged ones with a warning) and every process reads the same
        one, so the directory must be on a file system all machines share.
        """
        if not self.resume:
            return None
        choice: tuple[str | None, str | None] = (None, None)
        if ctx.is_main:
            try:
                chosen = self._choose()
                choice = (str(chosen) if chosen else None, None)
            except TextorchError as exc:
                choice = (None, str(exc))
        path, error = ctx.all_gather_objects(choice)[0]
        if error:
            raise CheckpointError(error)
        if path is None:
            return None
        if not Path(path, STATE_FILE).is_file():
            raise CheckpointError(f"{path}: checkpoint not visible from rank {ctx.rank}: "
                                  "put the output on a file system every machine shares")
        return read_checkpoint(Path(path))

    def _choose(self) -> Path | None:
        candidates: list[Path] = []
        for directory in (self.directory, *self.also_read):
            candidates += list_checkpoints(directory)
        candidates.sort(key=lambda p: _order_key(p.name))  # type: ignore[arg-type, return-value]
        for path in reversed(candidates):
            problem = check_checkpoint(path)
            if problem is None:
                meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
                self._check_same_run(path, meta)
                return path
            logger.warning("skipping damaged checkpoint %s (%s)", path, problem)
        return None

    def _check_same_run(self, path: Path, meta: dict) -> None:
        if meta.get("run_sha256") == self.run_sha256:
            return
        differences = run_differences(meta.get("run") or {}, self.run) or ["the run descriptions differ"]
        raise CheckpointError(
            f"--resume: {path} belongs to another run: {'; '.join(differences)}. Resume with the same "
            "command and data, or delete the checkpoints to start again"
        )


def check_checkpoint(path: Path) -> str | None:
    """Why the checkpoint at ``path`` cannot be used, or None when it is intact."""
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{META_FILE} missing"
    except (OSError, ValueError) as exc:
        return f"{META_FILE} unreadable ({exc})"
    if not isinstance(meta, dict) or not isinstance(meta.get("format_version"), int):
        return f"{META_FILE} is not a textorch checkpoint description"
    if meta["format_version"] > FORMAT_VERSION:
        return f"checkpoint format {meta['format_version']} is newer than this textorch supports ({FORMAT_VERSION})"
    state = path / STATE_FILE
    if not state.is_file():
        return f"{STATE_FILE} missing"
    if sha256_file(state) != meta.get("state_sha256"):
        return f"{STATE_FILE} does not match its checksum (truncated or modified)"
    return None


def read_checkpoint(path: Path) -> Snapshot:
    meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    try:
        state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for damaged or unsafe files
        raise CheckpointError(f"{path / STATE_FILE}: cannot read the checkpoint ({exc})") from None
    return Snapshot(path, meta, state)


def _discard(path: Path) -> None:
    """Remove a directory so that it disappears at once (renamed aside, then deleted)."""
    trash = path.parent / f".trash-{path.name}-{uuid.uuid4().hex[:8]}"
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------- back to the trainer
def final_result(snapshot: Snapshot) -> "TrainingResult":
    """The training result recorded in a ``final`` checkpoint."""
    saved = dict(snapshot.meta["result"])
    history = [EpochRecord(**record) for record in saved.pop("history")]
    return TrainingResult(history=history, **saved)


def resume_progress(snapshot: Snapshot, ctx: DistContext) -> tuple[dict, "Progress"]:
    """An in-progress checkpoint as the trainer's state (for :meth:`Trainer.load_state_dict`:
    weights, optimizer, scheduler, scaler) and where training stands. Random states are restored
    separately, just before the first step (:func:`textorch.train.rng_state.restore_rng`), since
    setting up the trainer may draw random numbers."""

    state, meta = snapshot.state, snapshot.meta
    if len(state["rng"]) != ctx.world_size:
        raise CheckpointError(f"{snapshot.path}: made by {len(state['rng'])} process(es), resumed with "
                              f"{ctx.world_size}: resume with the same --devices/--nnodes")
    trainer_state = {"model": state["model"], "optimizer": state["optimizer"],
                     "scheduler": state.get("scheduler"), "scaler": state.get("scaler")}
    stopping, position = meta["early_stopping"], meta["position"]
    result = TrainingResult(history=[EpochRecord(**r) for r in meta["history"]],
                            best_epoch=stopping["best_epoch"], best_score=stopping["best_score"])
    # The epoch's sums so far were reduced over processes when saved: rank 0 carries them on.
    partial = state["partial_epoch_totals"] if ctx.is_main else torch.zeros(3, dtype=torch.float64)
    progress = Progress(result=result, epoch=position["epoch"], step=position["step"],
                        global_step=position["global_step"], epochs_without_gain=stopping["epochs_without_gain"],
                        best_state=state.get("best_model"), totals=partial.clone(),
                        total_tokens=meta["total_tokens"], elapsed_s=meta["train_seconds"], rng=state["rng"])
    return trainer_state, progress
