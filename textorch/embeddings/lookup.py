"""Which vector a token gets: the rule is part of a model, since it decided what the model saw.

textorch's own rule (``exact_or_lower``) is :meth:`StaticEmbeddings.lookup`. Models imported
from DeLFT 1.x keep DeLFT's (``delft``): every ASCII or full-width digit becomes ``0``, then
only the exact form is looked up, a miss giving zeros. Any other rule would feed the imported
network vectors it never saw in training, and its labels would drift from DeLFT's.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

_DIGITS = re.compile(r"[0-9０１２３４５６７８９]")


def delft_normalize(word: str) -> str:
    """DeLFT's number normalisation, applied before the lookup."""
    return _DIGITS.sub("0", word)


class DelftLookup:
    """A vector source (``dim`` + ``lookup``, what :class:`textorch.data.word_table.WordTable`
    reads) with DeLFT's rule over a :class:`StaticEmbeddings`."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self.dim = embeddings.dim

    def lookup(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return self.embeddings.lookup_exact([delft_normalize(w) for w in words])


def word_source(embeddings: Any, rule: str) -> Any:
    """What a model's word table reads for lookup ``rule`` (see ``DataConfig.word_lookup``)."""
    if rule == "delft":
        return DelftLookup(embeddings)
    return embeddings
