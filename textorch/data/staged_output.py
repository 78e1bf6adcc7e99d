"""An output file that appears complete or not at all, and keeps what was written when a run fails.

A streamed run writes as it goes, so a failure far into a long input (a malformed line, a
Ctrl-C, a killed worker) would leave a truncated file under the name the user asked for. Here
the writing goes to a hidden temporary file in the target's folder (same file system: the
final rename is atomic); on success it is renamed to the target, on failure to
``TARGET.partial``, and the error names that file. Without a target the lines go to stdout as
they come.

A document whose first bytes are known only at the end (a JSON answer's header carries the
run time) registers ``head`` and ``tail`` callables: the body written so far is then copied
after the head into the final file, which costs one sequential copy and keeps memory flat.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from textorch.errors import ConfigError, DataError

PARTIAL_SUFFIX = ".partial"


class StagedOutput:
    """Where a streamed run writes: ``out`` (the temporary file, or stdout), then :meth:`finish`."""

    def __init__(self, target: str | Path | None) -> None:
        self.target = Path(target) if target else None
        self.head: Callable[[bool], str] | None = None
        """The document's first bytes, asked for at the end (True: the run failed); None: nothing to add."""
        self.tail: Callable[[bool], str] | None = None
        """The document's last bytes, asked for at the end (True: the run failed)."""
        self.items = 0
        """Items written so far, for the failure message."""
        self.unit = "sequences"
        """What the items are, in that message."""
        self._staging: Path | None = None
        if self.target is None:
            self.out: TextIO = sys.stdout
            return
        if self.target.is_dir():
            raise ConfigError(f"{self.target}: is a folder; give the output file's path")
        self._staging = self.target.parent / f".{self.target.name}.{os.getpid()}.tmp"
        try:  # before any tagging: a bad output path fails at once, not after the whole run
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.out = open(self._staging, "w", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{self.target}: cannot write the output ({exc.strerror or exc})") from None

    def finish(self, failed: bool) -> Path | None:
        """Close the document; on a file, rename it to the target (or ``TARGET.partial``)."""
        head = self.head(failed) if self.head is not None else ""
        tail = self.tail(failed) if self.tail is not None else ""
        if self.target is None or self._staging is None:
            if tail and not failed:  # stdout: a failed stream just stops, the error says why
                self.out.write(tail)
            self.out.flush()
            return None
        partial = self.target.with_name(self.target.name + PARTIAL_SUFFIX)
        final = partial if failed else self.target
        assembled = self._staging.with_name(self._staging.name + ".head")
        try:
            self.out.write(tail)
            self.out.close()
            if head:
                with open(assembled, "w", encoding="utf-8") as out, open(self._staging, encoding="utf-8") as body:
                    out.write(head)
                    shutil.copyfileobj(body, out, 1 << 20)
                os.replace(assembled, final)
                self._staging.unlink()
            else:
                os.replace(self._staging, final)
        except OSError as exc:  # a full disk, say: no temporary file left behind
            self.out.close()
            for leftover in (assembled, self._staging):
                leftover.unlink(missing_ok=True)
            raise ConfigError(f"{final}: cannot write the output ({exc.strerror or exc})") from None
        if not failed:  # an earlier failed run's part of this output is out of date now
            partial.unlink(missing_ok=True)
        return final

    def discard(self) -> None:
        """Remove the temporary file (a failure before anything could be written)."""
        if self._staging is not None:
            self.out.close()
            self._staging.unlink(missing_ok=True)


@contextmanager
def staged_output(target: str | Path | None, write: bool = True) -> Iterator[StagedOutput | None]:
    """A :class:`StagedOutput` for the body of a streamed run (None when ``write`` is False: a
    process that does not write, another rank of a multi-process run).

    On an exception the written part is kept as ``TARGET.partial`` and a ``TextorchError`` (a
    data error far into the input) is raised again with that file named in its message.
    """
    if not write:
        try:
            yield None
        except DataError as exc:
            # Every process meets a data error at the same place; the writing one reports it,
            # naming its .partial (see textorch.train.launch: one line per root cause).
            exc.secondary = True  # type: ignore[attr-defined]
            raise
        return
    staged = StagedOutput(target)
    try:
        yield staged
    except BaseException as exc:
        if staged.items == 0:
            staged.discard()
            raise
        kept = staged.finish(failed=True)
        if kept is None:
            raise
        note = f"the {staged.items} {staged.unit} written before it are in {kept}"
        if isinstance(exc, DataError):
            raise DataError(exc.path, exc.line, f"{exc.message} ({note})") from None
        print(f"textorch: stopped; {note}", file=sys.stderr)
        raise
    staged.finish(failed=False)
