"""Library exceptions.

Every error a user can cause (bad data, bad option, broken model directory) is a
``TextorchError``: the CLI prints its message on one line, without a traceback, and exits
with status 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path


class TextorchError(Exception):
    """A user-facing error whose message is complete on its own."""


class DataError(TextorchError):
    """A problem in an input file, located at ``path:line`` so the user can open it there."""

    def __init__(self, path: str | Path | None, line: int | None, message: str) -> None:
        self.path = str(path) if path is not None else "<input>"
        self.line = line
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {message}")


class ConfigError(TextorchError):
    """An invalid option or configuration value; the message names the valid choices."""


class ModelFormatError(TextorchError):
    """A model directory that cannot be loaded (missing, truncated, tampered or too new)."""