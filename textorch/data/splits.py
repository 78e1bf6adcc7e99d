"""Seeded hold-out splits of both tasks' data, n-fold index sets, and cutting of over-long training sequences.

:func:`training_splits` is the one hold-out rule: tagging and classification runs, whatever
command or API call starts them, take their test and validation shares through it, so a file
splits the same way everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

import numpy as np

from textorch.data.cls_readers import ClsCorpus, ClsExample
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.tags import normalize_to_iob2
from textorch.errors import ConfigError

logger = logging.getLogger(__name__)

TEST_FRACTION = 0.1
"""Share of the training data held out as test data when a run must score itself and has no test file."""

AnyCorpus = TypeVar("AnyCorpus", Corpus, ClsCorpus)


def holdout(sequences: list[TokenSequence], fraction: float, seed: int) -> tuple[list[TokenSequence], list[TokenSequence]]:
    """``(kept, held_out)`` with ``round(fraction * n)`` held out (at least one when n >= 2)."""
    n = len(sequences)
    n_held = max(1, round(fraction * n)) if n >= 2 else 0
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:n_held].tolist())
    kept = [s for i, s in enumerate(sequences) if i not in held]
    return kept, [sequences[i] for i in sorted(held)]


def hold_out(corpus: AnyCorpus, fraction: float, seed: int, note: str = "held out") -> tuple[AnyCorpus, AnyCorpus]:
    """``(kept, held_out)`` corpora: :func:`holdout` of a tagging corpus, :func:`stratified_holdout`
    of a classification corpus (so rare classes keep their share); the held-out part's path says
    what share it is (``train.txt (10% held out)``)."""
    if isinstance(corpus, ClsCorpus):
        return stratified_holdout(corpus, fraction, seed, note)
    kept, held = holdout(corpus.sequences, fraction, seed)
    return replace(corpus, sequences=kept), replace(corpus, sequences=held, path=f"{corpus.path} ({fraction:.0%} {note})")


def training_splits(
    train: AnyCorpus, valid: AnyCorpus | None, test: AnyCorpus | None, *, hold_out_test: bool,
    valid_fraction: float | None, seed: int, notes: tuple[str, str] = ("held out", "held out"),
) -> tuple[AnyCorpus, AnyCorpus | None, AnyCorpus | None]:
    """``(train, valid, test)`` after the hold-out rule of every training run.

    With ``hold_out_test`` and no ``test``, :data:`TEST_FRACTION` of ``train`` (seed ``seed``)
    becomes the test data; then, when validation data is wanted (``valid_fraction`` not None)
    and no ``valid`` is given, that share of what remains (seed ``seed + 1``) becomes it.
    ``notes`` name the two held-out parts in their paths.
    """
    if hold_out_test and test is None:
        train, test = hold_out(train, TEST_FRACTION, seed, notes[0])
    if valid_fraction is not None and valid is None:
        train, valid = hold_out(train, valid_fraction, seed + 1, notes[1])
        if not len(valid):  # too few to hold one out (a single sequence): no validation data, not an empty one
            valid = None
    return train, valid, test


def _grouped_order(examples: list[ClsExample], seed: int) -> list[list[int]]:
    """Indices grouped by label set (each group in a seeded random order), groups sorted by key."""
    order = np.random.default_rng(seed).permutation(len(examples))
    groups: dict[tuple, list[int]] = {}
    for index in order.tolist():
        groups.setdefault(tuple(examples[index].labels or ()), []).append(index)
    return [groups[key] for key in sorted(groups)]


def stratified_holdout(corpus: ClsCorpus, fraction: float, seed: int, note: str = "held out") -> tuple[ClsCorpus, ClsCorpus]:
    """``(kept, held_out)`` with ``round(fraction * n)`` held out (at least one when n >= 2), each label
    set contributing its share rounded down or up (largest remainders first), so rare classes keep theirs."""
    groups = _grouped_order(corpus.examples, seed)
    quotas = np.array([fraction * len(g) for g in groups])
    take = np.floor(quotas).astype(int)
    total = max(1, round(fraction * len(corpus))) if len(corpus) >= 2 else 0
    for k in np.argsort(-(quotas - take), kind="stable")[: max(0, total - int(take.sum()))]:
        take[k] += 1
    held: set[int] = set()
    for group, n in zip(groups, take):
        held.update(group[:n])
    kept_examples = [e for i, e in enumerate(corpus.examples) if i not in held]
    held_examples = [e for i, e in enumerate(corpus.examples) if i in held]
    path = f"{corpus.path} ({fraction:.0%} {note})"
    return replace(corpus, examples=kept_examples), replace(corpus, examples=held_examples, path=path)


def fold_indices(n: int, k: int, seed: int) -> list[list[int]]:
    """``k`` disjoint folds covering ``range(n)``, sizes differing by at most one, seeded."""
    if k < 2:
        raise ConfigError(f"--fold-count must be >= 2 for n-fold training, got {k}")
    if n < k:
        raise ConfigError(f"--fold-count {k} needs at least {k} training sequences, got {n}")
    order = np.random.default_rng(seed).permutation(n)
    return [sorted(part.tolist()) for part in np.array_split(order, k)]


def stratified_folds(examples: list[ClsExample], k: int, seed: int) -> list[np.ndarray]:
    """``k`` disjoint validation index sets covering every example; each label set dealt evenly."""
    folds: list[list[int]] = [[] for _ in range(k)]
    position = 0
    for group in _grouped_order(examples, seed):
        for index in group:
            folds[position % k].append(index)
            position += 1
    return [np.array(sorted(f), dtype=np.int64) for f in folds]


def piece_lengths(lengths: Sequence[int], max_length: int) -> list[int]:
    """The lengths of the pieces :func:`cut_long_sequences` makes of sequences of ``lengths``."""
    if max_length <= 0:
        return list(lengths)
    return [min(max_length, n - start) for n in lengths for start in range(0, max(n, 1), max_length)]


def cut_long_sequences(sequences: list[TokenSequence], max_length: int) -> list[TokenSequence]:
    """Cut sequences longer than ``max_length`` into consecutive pieces (no token dropped).

    Only training uses this, to bound batch memory; tagging always sees whole sequences.
    """
    if max_length <= 0:
        return sequences
    out: list[TokenSequence] = []
    for sequence in sequences:
        if len(sequence) <= max_length:
            out.append(sequence)
            continue
        for start in range(0, len(sequence), max_length):
            end = start + max_length
            out.append(
                replace(
                    sequence,
                    tokens=sequence.tokens[start:end],
                    labels=None if sequence.labels is None else sequence.labels[start:end],
                    features=None if sequence.features is None else sequence.features[start:end],
                    offsets=None if sequence.offsets is None else sequence.offsets[start:end],
                )
            )
    return out


def training_pieces(sequences: list[TokenSequence], max_length: int) -> list[TokenSequence]:
    """:func:`cut_long_sequences` for training, said once in the log when it cuts anything (a
    whole document is no problem to report per document: every token is kept)."""
    long = [len(s) for s in sequences if max_length > 0 and len(s) > max_length]
    if long:
        pieces = len(piece_lengths(long, max_length))
        noun = "sequence" if len(long) == 1 else "sequences"
        logger.info("%d training %s longer than %s tokens (longest %s) read as %s consecutive pieces of at most %s "
                    "tokens, every token kept; tagging reads whole sequences", len(long), noun, f"{max_length:,}",
                    f"{max(long):,}", f"{pieces:,}", f"{max_length:,}")
    return cut_long_sequences(sequences, max_length)


def valid_iob2(sequences: list[TokenSequence]) -> list[TokenSequence]:
    """``sequences`` whose gold labels are valid IOB2 (an ``I-X`` that continues no ``X`` opens
    one, as the scorer reads it anyway), for a CRF that rules the invalid moves out: GROBID's
    files can open a sequence with a continuation label. The caller's sequences are not changed."""
    out = []
    for sequence in sequences:
        labels = normalize_to_iob2(sequence.labels) if sequence.labels else sequence.labels
        out.append(sequence if labels == sequence.labels else replace(sequence, labels=labels))
    return out
