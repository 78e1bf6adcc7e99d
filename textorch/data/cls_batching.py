"""Texts to padded id batches for the classifiers: words (static vectors or a learned vocabulary)
or transformer word pieces.

The trainer only needs ``lengths()`` and ``batch(indices)`` from :class:`EncodedTexts`, so the
same length-bucketed, shardable batching serves classification and sequence labelling.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from textorch.data.batching import moved_to
from textorch.data.tokenize import tokenize
from textorch.data.vocab import Vocabulary
from textorch.data.word_table import WordTable


@dataclass
class ClsBatch:
    """One padded batch; ``indices`` are positions in the encoded list."""

    token_ids: torch.Tensor  # (B, L) vocabulary ids, word-table rows or word-piece ids
    mask: torch.Tensor  # (B, L) bool
    lengths: torch.Tensor  # (B,) on CPU: tokens per text, for packing and throughput
    word_vectors: torch.Tensor | None  # (B, L, D) frozen pre-trained vectors
    targets: torch.Tensor | None  # (B,) class ids, or (B, C) 0/1 floats for multi-label
    indices: list[int]

    def to(self, device: torch.device | str) -> "ClsBatch":
        return moved_to(self, device)

    def __len__(self) -> int:
        return len(self.indices)


@dataclass
class EncodedTexts:
    """Id arrays (at least one id each) plus targets; what the trainer and predictor batch from."""

    ids: list[np.ndarray]
    targets: np.ndarray | None = None
    word_table: WordTable | None = None
    pad_id: int = 0

    def lengths(self) -> list[int]:
        return [len(x) for x in self.ids]

    def batch(self, indices: list[int]) -> ClsBatch:
        items = [self.ids[i] for i in indices]
        lengths = np.fromiter((len(x) for x in items), dtype=np.int64, count=len(items))
        token_ids = np.full((len(items), int(lengths.max())), self.pad_id, dtype=np.int64)
        for row, item in enumerate(items):
            token_ids[row, : len(item)] = item
        mask = np.arange(token_ids.shape[1])[None, :] < lengths[:, None]
        vectors = None
        if self.word_table is not None:
            vectors = torch.from_numpy(self.word_table.matrix[np.where(mask, token_ids, 0)])
        targets = None if self.targets is None else torch.from_numpy(self.targets[indices])
        return ClsBatch(torch.from_numpy(token_ids), torch.from_numpy(mask), torch.from_numpy(lengths),
                        vectors, targets, list(indices))


class WordEncoder:
    """Library tokenisation, cut at ``max_length`` tokens, mapped to word-table rows or vocabulary ids.

    With pre-trained vectors, words unseen in training still get their vector (the table looks
    them up on first sight), as in DeLFT; without, a vocabulary learned from the training texts
    maps unseen words to ``<unk>``.
    """

    def __init__(self, max_length: int, vocab: Vocabulary | None = None, word_table: WordTable | None = None) -> None:
        if (vocab is None) == (word_table is None):
            raise ValueError("give either a vocabulary or a word table")
        self.max_length = max_length
        self.vocab = vocab
        self.word_table = word_table

    @staticmethod
    def tokens(text: str, max_length: int) -> list[str]:
        tokens, _ = tokenize(text)
        return tokens[:max_length] if max_length > 0 else tokens

    @classmethod
    def fit_vocab(cls, texts: list[str], max_length: int) -> Vocabulary:
        counts = Counter(token for text in texts for token in cls.tokens(text, max_length))
        return Vocabulary.from_counts(counts)

    def encode(self, texts: list[str], targets: np.ndarray | None = None) -> EncodedTexts:
        ids = []
        for text in texts:
            tokens = self.tokens(text, self.max_length) or ["<unk>"]
            if self.word_table is not None:
                ids.append(self.word_table.index(tokens))
            else:
                ids.append(np.asarray(self.vocab.ids(tokens), dtype=np.int64))
        return EncodedTexts(ids, targets, self.word_table, 0)


class PieceEncoder:
    """A Hugging Face tokenizer (with its special tokens), cut at ``max_length`` pieces."""

    def __init__(self, tokenizer: object, max_length: int) -> None:
        self.tokenizer = tokenizer
        model_max = getattr(tokenizer, "model_max_length", 512) or 512
        self.max_length = min(max_length, model_max) if max_length > 0 else min(model_max, 512)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0

    def encode(self, texts: list[str], targets: np.ndarray | None = None) -> EncodedTexts:
        encoded = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return EncodedTexts([np.asarray(x, dtype=np.int64) for x in encoded], targets, None, self.pad_id)
