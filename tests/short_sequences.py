"""A few short unlabelled sentences with repeated tokens, for tests of encoding and tagging paths."""

from __future__ import annotations

from textorch.data.corpus import TokenSequence


def short_sequences() -> list[TokenSequence]:
    """Four sentences of 1 to 7 tokens; "Paris", "John" and "in" repeat within and across them."""
    texts = ["John lives in Paris .", "Mary lives in Rome", "Paris", "John John John met Mary in Paris"]
    return [TokenSequence(tokens=t.split(), labels=None, features=None) for t in texts]
