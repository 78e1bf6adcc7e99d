"""Word vectors made for a test corpus, shared by the tests that train a tagger on one."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_corpus_vectors(path: Path, corpus, dim: int = 6) -> Path:
    """A word2vec text file (with its count line) holding every other distinct training word, so
    that word vectors are a real input and some words are out of the vocabulary."""
    words = sorted({t for s in corpus.sequences for t in s.tokens})[::2]
    rng = np.random.default_rng(0)
    lines = [f"{len(words)} {dim}"] + [f"{w} " + " ".join(f"{v:.4f}" for v in rng.normal(size=dim)) for w in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
