"""The progress bar of a long tagging, classification or evaluation run, and the tally of a
streamed run: sequences and tokens per second, on stderr.

A streamed run does not know how many sequences its input holds, so the bar counts tokens
(its rate is the throughput) and shows the sequences beside them. It is drawn only where
someone watches: stderr a terminal, the process rank 0, and no ``--quiet``.
"""

from __future__ import annotations

import sys
from typing import Any


class TaggingProgress:
    """A tqdm bar over tokens with the count and rate of sequences; a no-op when ``enabled`` is
    False or stderr is not a terminal (tqdm is then not imported at all: a short command's
    start-up would pay for a module it never uses)."""

    def __init__(self, description: str, enabled: bool = True) -> None:
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(desc=description, unit=" tok", unit_scale=True, file=sys.stderr,
                            dynamic_ncols=True, leave=False)
        self.sequences = 0

    def update(self, sequences: int, tokens: int) -> None:
        if self.bar is None:
            return
        self.sequences += sequences
        elapsed = self.bar.format_dict.get("elapsed") or 0.0
        rate = f", {self.sequences / elapsed:,.0f} seq/s" if elapsed > 0 else ""
        self.bar.set_postfix_str(f"{self.sequences:,} seq{rate}", refresh=False)
        self.bar.update(tokens)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> "TaggingProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunTally:
    """What a streamed run counts as it goes: items (sequences tagged, texts classified), their
    tokens and the seconds spent in the model (encoding, network, decoding; reading and writing
    aside), shown on the progress bar and written by ``--stats-json``. The base of every
    streamed run, tagging's and classification's, so that they count alike."""

    def __init__(self, progress: TaggingProgress | None = None) -> None:
        self.progress = progress
        self.n_sequences = 0
        self.n_tokens = 0
        self.tag_s = 0.0

    def tally(self, n_sequences: int, n_tokens: int, tag_s: float) -> None:
        """One chunk done: ``n_sequences`` items of ``n_tokens`` tokens in ``tag_s`` seconds."""
        self.n_sequences += n_sequences
        self.n_tokens += n_tokens
        self.tag_s += tag_s
        if self.progress is not None:
            self.progress.update(n_sequences, n_tokens)

    def stats(self, load_s: float) -> dict:
        """What ``--stats-json`` writes: the counts, the model's loading and working seconds, and
        the throughput (None when nothing took measurable time)."""
        return {
            "n_sequences": self.n_sequences,
            "n_tokens": self.n_tokens,
            "load_s": round(load_s, 6),
            "tag_s": round(self.tag_s, 6),
            "tokens_per_s": round(self.n_tokens / self.tag_s, 1) if self.tag_s > 0 else None,
        }
