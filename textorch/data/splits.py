"""Seeded hold-out splits and cutting of over-long training sequences."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from textorch.data.corpus import TokenSequence


def holdout(sequences: list[TokenSequence], fraction: float, seed: int) -> tuple[list[TokenSequence], list[TokenSequence]]:
    """``(kept, held_out)`` with ``round(fraction * n)`` held out (at least one when n >= 2)."""
    n = len(sequences)
    n_held = max(1, round(fraction * n)) if n >= 2 else 0
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:n_held].tolist())
    kept = [s for i, s in enumerate(sequences) if i not in held]
    return kept, [sequences[i] for i in sorted(held)]


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
