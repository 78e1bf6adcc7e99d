"""One training at a time into one ``--output``.

Two runs given the same output would both write its ``checkpoints/``, both report "model saved",
and the second would silently replace the first. A run therefore holds an exclusive ``flock`` on
a lock file beside the output (``.NAME.lock`` in its parent: inside, it would go with the old
directory when the model is saved by renaming a new one over it) from its first check to its end;
a second run is refused in one line while the first lives. The lock dies with its process, so a
run killed or crashed leaves nothing that blocks the next one; the file is removed when the run
ends (a waiting process re-checks that the file it locked is still the one at the path).

In a multi-process run rank 0 takes the lock for all, and tells the others whether it got it.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from textorch.errors import ModelFormatError
from textorch.train.dist import DistContext


def lock_path(output: str | Path) -> Path:
    """The lock file of a training into ``output``: a hidden sibling of the output directory."""
    resolved = Path(output).resolve()
    return resolved.with_name(f".{resolved.name}.lock")


def _acquire(output: str | Path) -> int:
    """An open descriptor holding the exclusive lock of ``output``; refused when another process holds it."""
    path = lock_path(output)
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise ModelFormatError(f"{output}: cannot write the model here (creating {path} fails: "
                                   f"{exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_holder(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ModelFormatError(
                    f"{output}: another training is writing this model directory{holder}; wait for it to end "
                    "or give another --output") from None
            raise ModelFormatError(f"{output}: cannot lock {path} ({exc.strerror or exc})") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the run that held it ended and removed the file: lock the one at the path now
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (process {pid})" if pid.isdigit() else ""


def _release(output: str | Path, fd: int) -> None:
    try:
        os.unlink(lock_path(output))  # while still held: a process waiting on it re-checks the path
    except OSError:
        pass
    os.close(fd)


@contextmanager
def training_output(output: str | Path | None, ctx: DistContext | None = None) -> Iterator[None]:
    """Hold ``output`` for the body's duration (nothing when ``output`` is None); a
    :class:`ModelFormatError` when another training holds it."""
    ctx = ctx or DistContext()
    if output is None:
        yield
        return
    fd, error = None, None
    if ctx.is_main:
        try:
            fd = _acquire(output)
        except ModelFormatError as exc:
            error = str(exc)
    error = ctx.all_gather_objects(error)[0]
    if error:
        raise ModelFormatError(error)
    try:
        yield
    finally:
        if fd is not None:
            _release(output, fd)
