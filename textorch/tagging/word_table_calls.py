"""Tagging calls in flight over one labeler's word table, and the bound on that table.

A server tagging for months meets new words for ever (numbers, names), so the table of gathered
word vectors is bounded. A call holds row ids into it from encoding to decoding, so the table
may start anew only while no call is in flight: a call that finds it too large waits for the
others to finish, then resets it. Threads tagging with one model share this gate.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from textorch.data.word_table import WordTable

WORD_TABLE_MAX_BYTES = 512 * 2**20
"""Memory of gathered word vectors above which a tagging call starts a fresh table."""


class WordTableCalls:
    """Counts the tagging calls running now (in any thread) over one word table."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._in_flight = 0

    @contextlib.contextmanager
    def call(self, table: WordTable | None) -> Iterator[None]:
        """One tagging call over ``table`` (None: a model without word vectors)."""
        with self._changed:
            if table is not None and table.nbytes > WORD_TABLE_MAX_BYTES:
                self._changed.wait_for(lambda: self._in_flight == 0)
                table.reset_if_larger(WORD_TABLE_MAX_BYTES)
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                if not self._in_flight:
                    self._changed.notify_all()
