"""Learning-rate cuts on a validation plateau (DeLFT 1.2.0's ``ReduceLROnPlateau``): the rule
replayed from the score history agrees with torch's scheduler, and training applies it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from conftest import write_tiny_conll
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.labeler import SequenceLabeler
from textorch.train.lr_plateau import apply_plateau_rate, plateau_cuts

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, dropout=0.1)


@pytest.mark.parametrize("patience", [0, 1, 2, 4])
def test_cuts_follow_torch_reduce_lr_on_plateau(patience: int) -> None:
    """Scores with ties, zeros, gains below the relative threshold and real gains: after every
    epoch the replayed rate equals the one torch's scheduler reaches step by step."""
    rng = random.Random(patience)
    for _ in range(200):
        scores, level = [], rng.choice([0.0, 0.5])
        for _ in range(rng.randint(1, 25)):
            move = rng.choice(["same", "tiny gain", "gain", "drop"])
            level = {"same": level, "tiny gain": level * (1 + 5e-5), "gain": level + 0.01, "drop": level - 0.02}[move]
            scores.append(max(level, 0.0))
        weight = torch.nn.Parameter(torch.zeros(1))
        optimizer = torch.optim.SGD([weight], lr=1.0)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", factor=0.5, patience=patience)
        for k, score in enumerate(scores, start=1):
            scheduler.step(score)
            assert optimizer.param_groups[0]["lr"] == 0.5 ** plateau_cuts(scores[:k], patience), (scores[:k], patience)


def test_rate_is_set_from_each_group_initial_rate() -> None:
    weights = [torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))]
    optimizer = torch.optim.Adam([{"params": [weights[0]], "lr": 0.01}, {"params": [weights[1]], "lr": 0.1}])
    flat = [0.5, 0.5, 0.5, 0.5]  # patience 0: a cut after each of the three epochs without gain
    assert apply_plateau_rate(optimizer, flat, 0.5, 0) == pytest.approx(0.01 / 8)
    assert optimizer.param_groups[1]["lr"] == pytest.approx(0.1 / 8)
    # Applied again on the same history (as after a resume): the same rates, not cut twice.
    apply_plateau_rate(optimizer, flat, 0.5, 0)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([0.01 / 8, 0.1 / 8])


def _fit(tmp_path: Path, **train: object) -> list:
    corpus = read_labelled(write_tiny_conll(tmp_path / "train.conll", n=24))
    labeler = SequenceLabeler.build(corpus, ModelConfig(**SMALL), DataConfig(), seed=1)
    # A rate far too small to change the validation F1: every epoch after the first is one without gain.
    config = TrainConfig(max_epoch=5, batch_size=8, learning_rate=1e-9, patience=10, seed=1, **train)
    return labeler.fit(corpus, corpus, config).history


def test_training_cuts_the_rate_when_validation_stalls(tmp_path: Path) -> None:
    history = _fit(tmp_path, lr_decay=0.5, lr_decay_patience=1)
    scores = [r.valid_score for r in history]
    assert None not in scores and len(set(scores)) == 1
    # Each record holds the rate its epoch trained with: cuts after epochs 3 and 5 (patience 1).
    assert [r.learning_rate for r in history] == pytest.approx([1e-9, 1e-9, 1e-9, 5e-10, 5e-10])


def test_constant_rate_by_default(tmp_path: Path) -> None:
    assert [r.learning_rate for r in _fit(tmp_path)] == pytest.approx([1e-9] * 5)


@pytest.mark.parametrize("field, value", [("lr_decay", 0.0), ("lr_decay", 1.5), ("lr_decay_patience", -1)])
def test_bad_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field.replace("_", "-")):
        TrainConfig(**{field: value})
