"""A failed write (a full disk, a quota, a read-only file system) as the ``OSError`` it is.

Python's own writes raise ``OSError``, which each writer turns into one line naming its path
(a ``TextorchError``). Two libraries hide it: safetensors' Rust writer raises
``SafetensorError('Error while serializing: I/O error: No space left on device (os error 28)')``
and ``torch.save`` says ``RuntimeError: [enforce fail at inline_container.cc] . unexpected pos``,
the errno lost. :func:`save_safetensors` and :func:`torch_save` give the ``OSError`` back, so
the one ``except OSError`` of each writer covers them too; :func:`cannot_write` is the words.
"""

from __future__ import annotations

import errno as _errno
import os
import re
from pathlib import Path
from typing import Any

_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def cannot_write(path: str | Path, exc: OSError, what: str = "cannot write") -> str:
    """``PATH: cannot write (No space left on device)``: the message of a failed write."""
    return f"{path}: {what} ({exc.strerror or exc})"


def save_safetensors(tensors: dict[str, Any], path: str | Path) -> None:
    """``safetensors.torch.save_file``; a failed write raises the ``OSError`` it met."""
    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path))
    except Exception as exc:  # SafetensorError: an I/O error carries its errno in the text only
        found = _OS_ERROR.search(str(exc))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None


class _Recording:
    """A binary file for ``torch.save`` that keeps the ``OSError`` of a failed write."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.handle.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.handle.flush()


def torch_save(obj: object, path: str | Path) -> None:
    """``torch.save(obj, path)``; a failed write raises the ``OSError`` it met (torch's own
    ``RuntimeError`` says only ``unexpected pos``)."""
    import torch

    with open(path, "wb") as handle:
        recording = _Recording(handle)
        try:
            torch.save(obj, recording)  # type: ignore[arg-type]
        except RuntimeError:
            if recording.error is None:
                raise
            raise recording.error from None


def write_report(path: str | Path, text: str, option: str) -> None:
    """Write a small report file an option names (``--metrics-json``, ``--stats-json``), its
    folder made first; a place that cannot hold it is a ``ConfigError`` naming the option and
    the path (a folder given, a path under a file, a read-only or full file system)."""
    from textorch.errors import ConfigError

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        if isinstance(exc, FileExistsError):  # mkdir: a file where the folder should be
            exc = NotADirectoryError(_errno.ENOTDIR, f"{path.parent} is a file, not a folder")
        raise ConfigError(cannot_write(f"{option} {path}", exc, "cannot write it")) from None
