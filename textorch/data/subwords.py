"""Sub-token alignment and overlapping windows for transformer encoders.

A word is represented by its first sub-token; the other sub-tokens only give context. A
sequence longer than the encoder's limit is cut into overlapping windows of sub-tokens, all
windows go through the encoder, and each word takes its representation from the window in
which it has the most context on its poorer side (the window where it is "most central").
Every word thus gets exactly one vector, and the CRF above still sees the whole sequence,
in training as in tagging (DeLFT truncated instead, silently dropping the tail).

Nothing here imports ``transformers``: the tokenizer is any Hugging Face fast tokenizer,
passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch

from textorch.data.batching import Batch
from textorch.errors import ConfigError


@dataclass(frozen=True)
class SpecialTokens:
    """Ids the encoder expects around and between sub-tokens (``[CLS] ... [SEP]`` for BERT)."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    pad_id: int
    unk_id: int

    @classmethod
    def of(cls, tokenizer: object) -> "SpecialTokens":
        """Read from a tokenizer: BERT-style ``cls/sep``, else ``bos/eos`` (RoBERTa has both)."""
        first = _first_id(tokenizer, "cls_token_id", "bos_token_id")
        last = _first_id(tokenizer, "sep_token_id", "eos_token_id")
        pad = _first_id(tokenizer, "pad_token_id")
        unk = _first_id(tokenizer, "unk_token_id")
        return cls(
            prefix=() if first is None else (first,),
            suffix=() if last is None else (last,),
            pad_id=0 if pad is None else pad,
            unk_id=(pad or 0) if unk is None else unk,
        )

    @property
    def count(self) -> int:
        return len(self.prefix) + len(self.suffix)


def _first_id(tokenizer: object, *names: str) -> int | None:
    for name in names:
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return None


@dataclass
class SubwordSequence:
    """Sub-token ids of one word sequence (no special tokens) and where each word starts."""

    ids: np.ndarray  # (S,) int64
    word_starts: np.ndarray  # (L,) int64, strictly increasing indices into ``ids``

    def __len__(self) -> int:
        return len(self.ids)


def align_words(tokenizer: object, sequences: list[list[str]], unk_id: int) -> list[SubwordSequence]:
    """Tokenize pre-split words with the tokenizer's own normalisation (casing included).

    The text is never lower-cased here: a cased model gets the case, an uncased one lower-cases
    in its own normaliser. A word the tokenizer turns into nothing (a lone zero-width or control
    character) gets the unknown token, so every word keeps a position.
    """
    out: list[SubwordSequence] = [
        SubwordSequence(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)) for _ in sequences
    ]
    nonempty = [i for i, words in enumerate(sequences) if words]
    if not nonempty:
        return out
    encoding = tokenizer(  # type: ignore[operator]
        [sequences[i] for i in nonempty],
        is_split_into_words=True,
        add_special_tokens=False,
        truncation=False,
        padding=False,
        return_attention_mask=False,
        return_token_type_ids=False,
        verbose=False,  # windows handle sequences over the model's limit; no warning needed
    )
    for row, index in enumerate(nonempty):
        pieces: list[list[int]] = [[] for _ in sequences[index]]
        for token_id, word in zip(encoding["input_ids"][row], encoding.word_ids(row)):
            if word is not None:
                pieces[word].append(token_id)
        ids: list[int] = []
        starts: list[int] = []
        for word_pieces in pieces:
            starts.append(len(ids))
            ids.extend(word_pieces or [unk_id])
        out[index] = SubwordSequence(np.asarray(ids, dtype=np.int64), np.asarray(starts, dtype=np.int64))
    return out


@dataclass(frozen=True)
class WindowPlan:
    """Windows over one sequence's sub-tokens and, per word, the window it is read from."""

    starts: np.ndarray  # (K,) first sub-token of each window
    ends: np.ndarray  # (K,) one past the last sub-token
    word_window: np.ndarray  # (L,) index into starts
    word_offset: np.ndarray  # (L,) position of the word's first sub-token inside its window


def window_starts(n_subtokens: int, content: int, stride: int) -> list[int]:
    """Starts of windows of ``content`` sub-tokens, ``stride`` apart, the last one flush with the end."""
    if n_subtokens <= content:
        return [0]
    starts = list(range(0, n_subtokens - content + 1, stride))
    if starts[-1] + content < n_subtokens:
        starts.append(n_subtokens - content)
    return starts


def plan_windows(n_subtokens: int, word_starts: np.ndarray, content: int, stride: int) -> WindowPlan:
    """Choose, for each word, the window giving its first sub-token the most context.

    Context on a side is the distance to the window's edge, unbounded where that edge is the
    sequence's own edge (nothing is lost there); a word goes to the window maximising its
    smaller side, the earlier window on ties. With ``stride <= content`` every sub-token lies in
    some window, so every word is assigned.
    """
    starts = np.asarray(window_starts(n_subtokens, content, stride), dtype=np.int64)
    ends = np.minimum(starts + content, n_subtokens)
    p = np.asarray(word_starts, dtype=np.int64)[:, None]  # (L, 1)
    unbounded = n_subtokens + 1
    left = np.where(starts[None, :] > 0, p - starts[None, :], unbounded)
    right = np.where(ends[None, :] < n_subtokens, ends[None, :] - 1 - p, unbounded)
    inside = (p >= starts[None, :]) & (p < ends[None, :])
    score = np.where(inside, np.minimum(left, right), -1)  # (L, K)
    word_window = score.argmax(axis=1)
    return WindowPlan(starts, ends, word_window, np.asarray(word_starts) - starts[word_window])


@dataclass(kw_only=True)
class WindowedBatch(Batch):
    """A :class:`Batch` plus the encoder windows of its sequences and where each word is read."""

    window_ids: torch.Tensor  # (N, W) sub-token ids with special tokens, N windows in the batch
    window_mask: torch.Tensor  # (N, W) 1 for real sub-tokens
    word_index: torch.Tensor  # (B, L) flat index into the (N * W) encoder outputs


@dataclass
class WindowCollator:
    """Adds windows to batches of one encoded corpus; ``window`` counts the special tokens too."""

    subwords: list[SubwordSequence]
    specials: SpecialTokens
    window: int
    stride: int

    def __post_init__(self) -> None:
        check_window(self.window, self.stride, self.specials)

    @property
    def content(self) -> int:
        return self.window - self.specials.count

    def extend(self, batch: Batch) -> WindowedBatch:
        rows: list[np.ndarray] = []
        max_words = batch.mask.shape[1]
        word_window = np.zeros((len(batch.indices), max_words), dtype=np.int64)
        word_position = np.zeros((len(batch.indices), max_words), dtype=np.int64)
        prefix, suffix = np.asarray(self.specials.prefix, np.int64), np.asarray(self.specials.suffix, np.int64)
        for row, index in enumerate(batch.indices):
            sub = self.subwords[index]
            plan = plan_windows(len(sub), sub.word_starts, self.content, self.stride)
            n = len(sub.word_starts)
            word_window[row, :n] = len(rows) + plan.word_window
            word_position[row, :n] = len(prefix) + plan.word_offset
            rows.extend(np.concatenate([prefix, sub.ids[s:e], suffix]) for s, e in zip(plan.starts, plan.ends))
        width = max(len(r) for r in rows)
        window_ids = np.full((len(rows), width), self.specials.pad_id, dtype=np.int64)
        window_mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            window_ids[i, : len(r)] = r
            window_mask[i, : len(r)] = 1
        values = {f.name: getattr(batch, f.name) for f in fields(Batch)}
        return WindowedBatch(
            **values,
            window_ids=torch.from_numpy(window_ids),
            window_mask=torch.from_numpy(window_mask),
            word_index=torch.from_numpy(word_window * width + word_position),
        )


def check_window(window: int, stride: int, specials: SpecialTokens) -> None:
    """Windows must hold at least one sub-token, and consecutive windows must overlap or touch."""
    content = window - specials.count
    if content < 1:
        raise ConfigError(
            f"--transformer-window {window} leaves no room for text after {specials.count} special tokens"
        )
    if not 1 <= stride <= content:
        raise ConfigError(
            f"--transformer-stride must be between 1 and {content} (the window's sub-tokens "
            f"without special tokens), got {stride}"
        )
