"""Resumable training runs: where checkpoints live, whether a run starts, resumes or is done.

Layout, with ``--output OUT`` (the default place):

* while training, checkpoints are written under ``OUT/checkpoints/`` (one directory per
  checkpoint; ``member-I/`` sub-directories for the members of an n-fold ensemble);
* just before the model is saved they are moved to ``OUT.checkpoints/`` beside it, because the
  model directory is replaced as a whole by the atomic save; after the save they are deleted,
  or stay there with ``--keep-checkpoints``. The model directory never contains them.

With ``--checkpoint-dir DIR`` they are written to, and kept in, ``DIR`` instead; a run without
``--output`` (``train-eval``) has checkpoints only with this option, and on success leaves
``DIR/complete.json`` (the run's checksum and test scores) so that ``--resume`` can say it is done.

Every run has a *description*: the task, every model/training/data option, the checksums of
the data files and the number of processes. It is recorded in each checkpoint and its SHA-256
in the saved model's ``config.json`` (``training_run``). ``--resume`` refuses checkpoints of a
different description, naming what differs, and reports a run whose model (or
``complete.json``) carries its own description as complete. A run without ``--resume`` refuses
to start over checkpoints of an earlier run instead of silently discarding them.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import shutil
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

from textorch.errors import ConfigError, TextorchError
from textorch.model_dir import CONFIG_FILE, check_writable
from textorch.train.checkpoint_options import CheckpointOptions
from textorch.train.checkpoint import META_FILE, Checkpointer, CheckpointError, list_checkpoints, sha256_file
from textorch.train.dist import DistContext

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
COMPLETE_FILE = "complete.json"
FRESH, RESUME, COMPLETE = "fresh", "resume", "complete"

T = TypeVar("T")


def describe_run(task: str, configs: dict[str, dict], files: dict[str, str | None], options: dict,
                 world_size: int) -> dict:
    """What must be equal for a checkpoint to continue this run: options, data content, processes.

    Files are compared by content (SHA-256), not by path, so a moved directory still resumes.
    """
    data_files = {}
    for role, path in files.items():
        if path is None:
            continue
        try:
            data_files[role] = {"sha256": sha256_file(Path(path))}
        except OSError:
            data_files[role] = {"sha256": None}  # the reader reports the problem properly later
    description = {"task": task, **configs, "files": data_files, "options": options, "processes": world_size}
    return json.loads(json.dumps(description))  # tuples as lists: equal to what JSON gives back


def run_checksum(description: dict) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass
class RunCheckpoints:
    """The checkpoints of one training command, as decided by :func:`prepare_run` (same on every process)."""

    options: CheckpointOptions
    root: Path
    """Where checkpoints are written while training."""
    kept: Path | None
    """``OUTPUT.checkpoints``: where they go before the model is saved (default layout only)."""
    output: Path | None
    run: dict
    run_sha256: str
    status: str
    """``fresh``, ``resume`` or ``complete``."""
    record: dict = field(default_factory=dict)
    """``complete.json`` of a finished run without ``--output`` (its test scores)."""

    def checkpointer(self, member: int | None = None) -> Checkpointer:
        """The checkpointer of the training loop of one ensemble member (None: the only loop)."""
        sub = "" if member is None else f"member-{member}"
        also = [self.kept / sub] if self.kept is not None else []
        info = {"command": sys.argv[1:], "cwd": os.getcwd()}
        return Checkpointer(self.root / sub, self.run, self.run_sha256, self.options.keep_last,
                            self.options.every_steps, self.options.resume, also, info)

    def model_record(self) -> dict:
        """What the saved model's ``config.json`` records as ``training_run``."""
        return {"sha256": self.run_sha256}

    def finished_model(self, load: Callable[[Path], T]) -> T | None:
        """``--resume`` of a run that had finished, for either model kind: its saved model,
        read with ``load``, or None without ``--output`` (``record`` then holds the test scores)."""
        if self.output is None:
            logger.info("training had already finished (%s)", self.root / COMPLETE_FILE)
            return None
        logger.info("training had already finished: the model is in %s", self.output)
        return load(self.output)

    def before_save(self, ctx: DistContext) -> None:
        """Move ``OUTPUT/checkpoints`` beside the model directory, which the save replaces whole."""
        if ctx.is_main and self.kept is not None and self.root.exists():
            try:
                if self.kept.exists():
                    _remove(self.kept)
                os.rename(self.root, self.kept)
            except OSError as exc:
                raise CheckpointError(f"{self.root}: cannot move the checkpoints to {self.kept} "
                                      f"({exc.strerror or exc})") from None
        ctx.barrier()

    def finish(self, ctx: DistContext, test_scores: dict | None = None) -> None:
        """After a successful run: delete the checkpoints (unless kept), record completion."""
        if ctx.is_main:
            place = self.root
            try:
                if not self.options.keep:
                    for place in (self.root, self.kept):
                        if place is not None and place.exists():
                            _remove_checkpoints(place)
                place = self.root
                if self.output is None:
                    self.root.mkdir(parents=True, exist_ok=True)
                    record = {"run_sha256": self.run_sha256, "run": self.run, "test_scores": test_scores,
                              "finished": _dt.datetime.now().astimezone().isoformat(timespec="seconds")}
                    _write_json_atomic(self.root / COMPLETE_FILE, record)
            except OSError as exc:
                raise CheckpointError(f"{place}: cannot finish the checkpoints ({exc.strerror or exc})") from None
            if self.options.keep:
                logger.info("checkpoints kept in %s", self.kept if self.kept is not None else self.root)
        ctx.barrier()


def prepare_run(options: CheckpointOptions | None, output: str | None, describe: Callable[[], dict],
                ctx: DistContext) -> RunCheckpoints | None:
    """Decide, on rank 0, whether this run starts, resumes or is already complete; every process
    gets the same decision (or the same error). None when the run has no checkpoint location."""
    if options is None:
        return None
    if options.directory is None and output is None:
        if options.resume:
            raise ConfigError("--resume needs --output or --checkpoint-dir: the place where the checkpoints are")
        return None
    decision: tuple[RunCheckpoints | None, str | None] = (None, None)
    if ctx.is_main:
        try:
            decision = (_decide(options, output, describe()), None)
        except TextorchError as exc:
            decision = (None, str(exc))
    run, error = ctx.all_gather_objects(decision)[0]
    if error:
        raise CheckpointError(error)
    return run


def _decide(options: CheckpointOptions, output: str | None, run: dict) -> RunCheckpoints:
    if options.directory is not None:
        root, kept = Path(options.directory), None
        check_writable(root)
    else:
        out = Path(output)  # type: ignore[arg-type]
        beside = out.resolve()
        root, kept = out / CHECKPOINTS, beside.with_name(beside.name + ".checkpoints")
    plan = RunCheckpoints(options, root, kept, Path(output) if output else None, run, run_checksum(run), FRESH)
    found = [p for place in (root, kept) if place is not None for p in _checkpoints_under(place)]
    if not options.resume:
        for place in (root, kept):
            if place is not None and _checkpoints_under(place):
                raise ConfigError(f"{place} holds checkpoints of an earlier run: add --resume to continue it, "
                                  f"or delete {place} to start again")
        if options.directory is not None and (root / COMPLETE_FILE).exists():
            (root / COMPLETE_FILE).unlink()  # this run replaces the finished one it records
        return plan
    finished_at = _finished_at(plan)
    newest = max((p.stat().st_mtime_ns for p in (c / META_FILE for c in found) if p.exists()), default=None)
    if finished_at is not None and (newest is None or newest <= finished_at):
        plan.status = COMPLETE
        if plan.output is None:
            plan.record = json.loads((root / COMPLETE_FILE).read_text(encoding="utf-8"))
        return plan
    if found:
        _check_same_run(max(found, key=lambda p: (p / META_FILE).stat().st_mtime_ns), plan)
        plan.status = RESUME
    else:
        logger.warning("--resume: no checkpoint in %s; training starts from the beginning", root)
    return plan


def _checkpoints_under(place: Path) -> list[Path]:
    """Checkpoints directly in ``place`` and in its ``member-I`` sub-directories."""
    if not place.is_dir():
        return []
    found = list_checkpoints(place)
    for member in sorted(place.glob("member-*")):
        found += list_checkpoints(member)
    return found


def _finished_at(plan: RunCheckpoints) -> int | None:
    """When this same run finished (the model's or ``complete.json``'s mtime), else None."""
    if plan.output is not None:
        path = plan.output / CONFIG_FILE
        key = ("training_run", "sha256")
    else:
        path = plan.root / COMPLETE_FILE
        key = ("run_sha256",)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        value = record
        for part in key:
            value = value.get(part) if isinstance(value, dict) else None
    except (OSError, ValueError):
        return None
    if value != plan.run_sha256:
        if path.exists() and plan.output is not None:
            logger.info("%s holds a model made by another run; it will be replaced", plan.output)
        return None
    return path.stat().st_mtime_ns


def _check_same_run(checkpoint: Path, plan: RunCheckpoints) -> None:
    from textorch.train.checkpoint import run_differences

    try:
        meta = json.loads((checkpoint / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # a damaged checkpoint is skipped, with a warning, when the trainer reads them
    if meta.get("run_sha256") != plan.run_sha256:
        differences = run_differences(meta.get("run") or {}, plan.run) or ["the run descriptions differ"]
        raise ConfigError(f"--resume: the checkpoints in {checkpoint.parent} belong to another run: "
                          f"{'; '.join(differences)}. Resume with the same command and data, or delete "
                          f"{checkpoint.parent} to start again")


def _remove_checkpoints(place: Path) -> None:
    """Delete what this module wrote in ``place``; ``place`` itself too when nothing else is left."""
    for path in _checkpoints_under(place):
        _remove(path)
    for member in place.glob("member-*"):
        _remove_if_empty(member)
    for leftover in [*place.glob(".tmp-*"), *place.glob(".trash-*")]:
        shutil.rmtree(leftover, ignore_errors=True)
    _remove_if_empty(place)


def _remove(path: Path) -> None:
    """Renamed aside first, so that a kill during the deletion leaves no half checkpoint under its name."""
    trash = path.with_name(f".trash-{path.name}-{uuid.uuid4().hex[:8]}")
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _write_json_atomic(path: Path, document: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
