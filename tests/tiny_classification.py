"""A tiny keyword-classification corpus and a quick trainer, shared by the classification tests."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from textorch.classification.classifier import ClsDataConfig, ClsModelConfig, TextClassifier
from textorch.data.cls_readers import ClsCorpus, ClsExample
from textorch.train.config import TrainConfig

TINY = dict(hidden=8, dense_size=8, word_dim=8, dropout=0.1)
KEYWORDS = {"positive": ["good", "great", "excellent"], "negative": ["bad", "awful", "poor"], "neutral": ["table", "paper", "method"]}
FILLER = ["the", "a", "this", "is", "was", "we", "found", "it", "very"]


def tiny_examples(n: int = 36, seed: int = 0) -> list[ClsExample]:
    """Short texts whose class is given by one keyword among filler words."""
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        label = list(KEYWORDS)[i % 3]
        words = [rng.choice(FILLER) for _ in range(rng.randint(1, 5))]
        words.insert(rng.randint(0, len(words)), rng.choice(KEYWORDS[label]))
        examples.append(ClsExample(" ".join(words) + " .", (label,), i + 2))
    return examples


def write_tiny_csv(path: Path, n: int = 36, seed: int = 0) -> Path:
    lines = ["text,label"] + [f"{e.text},{e.labels[0]}" for e in tiny_examples(n, seed)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_tiny_vectors(path: Path) -> Path:
    """A word-vector text file (6 dimensions) covering every word of :func:`tiny_examples`."""
    words = sorted({w for ws in KEYWORDS.values() for w in ws} | set(FILLER) | {"."})
    rng = np.random.default_rng(0)
    path.write_text("".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.normal(size=6))}\n" for w in words), encoding="utf-8")
    return path


def _train(corpus: ClsCorpus, architecture: str = "gru", epochs: int = 3, folds: int = 1, lr: float = 0.01,
           early_stop: bool = False, **model: object) -> tuple[TextClassifier, list]:
    config = ClsModelConfig(architecture=architecture, fold_count=folds, **{**TINY, **model})
    classifier = TextClassifier.build(corpus, config, ClsDataConfig(), seed=1)
    reports = classifier.fit(corpus, None, TrainConfig(max_epoch=epochs, batch_size=8, learning_rate=lr, early_stop=early_stop, seed=1))
    return classifier, reports
