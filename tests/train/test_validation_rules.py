"""Validation that cannot tell epochs apart picks none, and rules that follow the data's size:
validation data too small to be held out, batches small enough for enough steps an epoch."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import write_tiny_conll
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.readers import read_labelled
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_path import fitted_to_data, split_for_training

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, dropout=0.1)


def test_flat_validation_neither_stops_early_nor_picks_an_epoch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus = read_labelled(write_tiny_conll(tmp_path / "train.conll", n=24))
    labeler = SequenceLabeler.build(corpus, ModelConfig(**SMALL), DataConfig(), seed=1)
    # A rate far too small to move the validation F1: the same score at every epoch.
    config = TrainConfig(max_epoch=4, batch_size=8, learning_rate=1e-9, patience=1, seed=1)
    with caplog.at_level(logging.WARNING, logger="textorch.train.trainer"):
        result = labeler.fit(corpus, corpus, config)
    assert len({r.valid_score for r in result.history}) == 1
    assert len(result.history) == 4 and not result.stopped_early  # patience 1 would have stopped at epoch 2
    assert result.best_epoch == 4
    assert "cannot tell epochs apart, so the last epoch is kept" in caplog.text


def _corpus(n: int) -> Corpus:
    return Corpus([TokenSequence(["a", "b"], ["B-X", "O"]) for _ in range(n)], "conll", path="generated")


@pytest.mark.parametrize("n, valid_kept", [(75, False), (700, True)])
def test_a_validation_share_below_the_minimum_joins_the_training_data(n: int, valid_kept: bool) -> None:
    config = TrainConfig(min_validation_sequences=30, seed=3)
    train, valid, test = split_for_training(_corpus(n), None, None, True, config)
    assert (valid is not None) == valid_kept
    assert len(train) + (len(valid) if valid else 0) + len(test) == n
    fitted = fitted_to_data(config, len(train), valid is not None)
    assert fitted.early_stop == valid_kept  # no validation data: nothing to stop on


def test_a_given_validation_file_that_is_too_small_joins_too() -> None:
    config = TrainConfig(min_validation_sequences=30)
    train, valid, _ = split_for_training(_corpus(100), _corpus(7), None, False, config)
    assert valid is None and len(train) == 107
    train, valid, _ = split_for_training(_corpus(100), _corpus(7), None, False, replace(config, min_validation_sequences=0))
    assert valid is not None and len(train) == 100


@pytest.mark.parametrize("n_train, batch", [(68, 3), (30, 1), (1175, 20), (2000, 20)])
def test_batches_shrink_to_give_enough_steps(n_train: int, batch: int) -> None:
    config = TrainConfig(batch_size=20, min_steps_per_epoch=20)
    assert fitted_to_data(config, n_train, True).batch_size == batch
    assert fitted_to_data(replace(config, min_steps_per_epoch=0), n_train, True).batch_size == 20
