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

A write that fails (a full disk, a quota) ends the run in one line naming the output, and
nothing is kept: what the failed write left in the file may end in a cut line, and a JSON
answer could not be closed. The temporary file is removed whatever happens.
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
from textorch.runtime.write_errors import cannot_write

PARTIAL_SUFFIX = ".partial"


class OutputWriteError(ConfigError):
    """The output file could not be written (a full disk): nothing of it is kept."""


class _CheckedWrites:
    """The temporary file's text stream, its failed writes (and a failed close: the last
    buffered bytes) raised as :class:`OutputWriteError` naming the output, once seen kept in
    ``error``: the caller removes the file rather than keep a part that may end mid-line."""

    def __init__(self, stream: TextIO, target: Path) -> None:
        self.stream = stream
        self.target = target
        self.error: OutputWriteError | None = None

    def _failed(self, exc: OSError) -> OutputWriteError:
        self.error = OutputWriteError(cannot_write(self.target, exc, "cannot write the output") + "; nothing of it is kept")
        return self.error

    def write(self, text: str) -> int:
        if self.error is not None:
            raise self.error
        try:
            return self.stream.write(text)
        except OSError as exc:
            raise self._failed(exc) from None

    def tell(self) -> int:
        """The position after what was written (buffered writes flushed to the file object)."""
        try:
            return self.stream.tell()
        except OSError as exc:
            raise self._failed(exc) from None

    def cut(self, position: int) -> None:
        """Drop what was written after ``position`` (a write a signal interrupted), go on from there."""
        try:
            self.stream.flush()
            self.stream.truncate(position)
            self.stream.seek(position)
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        if self.stream.closed:
            return
        try:
            self.stream.close()  # flushes; the file is closed even when that fails
        except OSError as exc:
            raise self._failed(exc) from None


class StagedOutput:
    """Where a streamed run writes: ``out`` (the temporary file, or stdout), then :meth:`finish`."""

    def __init__(self, target: str | Path | None) -> None:
        self.target = Path(target) if target else None
        self.head: Callable[[bool], str] | None = None
        """The document's first bytes, asked for at the end (True: the run failed); None: nothing to add."""
        self.tail: Callable[[bool], str] | None = None
        """The document's last bytes, asked for at the end (True: the run failed)."""
        self._whole: tuple[int, int | None] = (0, 0)
        """(items written whole, the position after them in the temporary file): see :meth:`wrote`."""
        self.unit = "sequences"
        """What the items are, in that message."""
        self._staging: Path | None = None
        if self.target is None:
            self.out: TextIO | _CheckedWrites = sys.stdout
            return
        self._staging = self.target.parent / f".{self.target.name}.{os.getpid()}.tmp"
        try:  # before any tagging: a bad output path fails at once, not after the whole run
            if self.target.is_dir():  # (asking may fail too: a name too long)
                raise ConfigError(f"{self.target}: is a folder; give the output file's path")
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.out = _CheckedWrites(open(self._staging, "w", encoding="utf-8"), self.target)
        except OSError as exc:
            raise ConfigError(f"{self.target}: cannot write the output ({exc.strerror or exc})") from None

    @property
    def items(self) -> int:
        """Items written whole so far, for the failure message."""
        return self._whole[0]

    def wrote(self, n: int) -> None:
        """``n`` more items are in the output, whole. Count and position change in one assignment,
        so a Ctrl-C or SIGTERM landing anywhere around a write leaves them agreeing; a failed
        run's part is cut back to that position (a write the signal interrupted may be in the
        file in part, or whole but not yet counted)."""
        position = self.out.tell() if isinstance(self.out, _CheckedWrites) else None
        self._whole = (self._whole[0] + n, position)

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
        if self.write_failed() is not None:  # what is in the file may end mid-line: nothing is kept
            self.discard()
            raise self.write_failed()  # type: ignore[misc]
        try:
            if failed and self._whole[1] is not None and isinstance(self.out, _CheckedWrites):
                self.out.cut(self._whole[1])
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
        except (OSError, OutputWriteError) as exc:  # a full disk, say: no temporary file left behind
            self.discard()
            assembled.unlink(missing_ok=True)
            if isinstance(exc, OutputWriteError):
                raise
            raise OutputWriteError(cannot_write(self.target, exc, "cannot write the output")
                                   + "; nothing of it is kept") from None
        if not failed:  # an earlier failed run's part of this output is out of date now
            partial.unlink(missing_ok=True)
        return final

    def write_failed(self) -> OutputWriteError | None:
        """The error of a write to the output that failed (a full disk), if one did."""
        return self.out.error if isinstance(self.out, _CheckedWrites) else None

    def discard(self) -> None:
        """Remove the temporary file (a failure before anything could be written, or a failed write)."""
        if self._staging is not None:
            try:
                self.out.close()
            except OutputWriteError:  # the last buffered bytes: the file goes anyway
                pass
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
        failed_write = staged.write_failed()
        if staged.items == 0 or failed_write is not None:
            staged.discard()
            if failed_write is not None and exc is not failed_write:
                raise failed_write from None  # the write failed first; what came of it is secondary
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
