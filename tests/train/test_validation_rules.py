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
from textorch.tagging import presets as apps
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training_data import fitted_to_data, split_for_training

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
    fitted = fitted_to_data(config, [len(x) for x in train.sequences], valid is not None)
    assert fitted.early_stop == valid_kept  # no validation data: nothing to stop on


def test_a_given_validation_file_that_is_too_small_joins_too() -> None:
    config = TrainConfig(min_validation_sequences=30)
    train, valid, _ = split_for_training(_corpus(100), _corpus(7), None, False, config)
    assert valid is None and len(train) == 107
    train, valid, _ = split_for_training(_corpus(100), _corpus(7), None, False, replace(config, min_validation_sequences=0))
    assert valid is not None and len(train) == 100


def _documents(n: int, length: int) -> Corpus:
    return Corpus([TokenSequence(["w"] * length, ["B-X"] + ["I-X"] * (length - 1)) for _ in range(n)], "conll",
                  path="documents")


@pytest.mark.parametrize("n_valid, length, kept", [(7, 2, False), (7, 2000, True), (7, 1400, False), (30, 2, True)])
def test_a_few_whole_documents_validate_where_as_many_short_strings_do_not(n_valid: int, length: int, kept: bool) -> None:
    # 7 documents of 2,000 tokens (14,000) reach the 10,000-token floor; 7 of 1,400 (9,800) and 7 pairs do not;
    # 30 sequences reach the sequence floor whatever their length
    config = TrainConfig(min_validation_sequences=30, min_validation_tokens=10_000)
    train, valid, _ = split_for_training(_documents(50, length), _documents(n_valid, length), None, False, config)
    assert (valid is not None) == kept
    assert len(train) == 50 + (0 if kept else n_valid)
    without_floor = replace(config, min_validation_tokens=0)
    _, valid, _ = split_for_training(_documents(50, length), _documents(n_valid, length), None, False, without_floor)
    assert (valid is not None) == (n_valid >= 30)


def test_with_validation_a_token_budget_sets_an_annealed_run_that_never_stops_early() -> None:
    config = TrainConfig(max_epoch=60, patience=5, tokens_with_validation=8_000)
    fitted = fitted_to_data(config, [400] * 50, True)  # 20,000 tokens an epoch: 8,000 / 20,000 rounds to 0 -> 1
    assert (fitted.max_epoch, fitted.lr_schedule, fitted.patience, fitted.early_stop) == (1, "linear", 1, True)
    fitted = fitted_to_data(replace(config, tokens_with_validation=300_000), [400] * 50, True)
    assert (fitted.max_epoch, fitted.lr_schedule, fitted.patience) == (15, "linear", 15)
    assert fitted.template_learning_rate == pytest.approx(config.learning_rate / 10)  # the long run's table rate
    given = fitted_to_data(replace(config, tokens_with_validation=300_000, template_learning_rate=5e-4), [400] * 50, True)
    assert given.template_learning_rate == 5e-4
    assert fitted_to_data(replace(config, tokens_with_validation=10_000_000), [400] * 50, True).max_epoch == 60
    unchanged = fitted_to_data(config, [400] * 50, False)  # without validation the budget does not apply
    assert (unchanged.lr_schedule, unchanged.max_epoch, unchanged.template_learning_rate) == ("constant", 60, 0.0)
    off = replace(config, tokens_with_validation=0)
    assert fitted_to_data(off, [400] * 50, True) == off


def test_the_grobid_default_keeps_validation_for_whole_documents_only() -> None:
    chosen = apps.resolve_options(apps.textorch_grobid_defaults(), {})
    config = TrainConfig(min_validation_sequences=chosen["min_validation_sequences"],
                         min_validation_tokens=chosen["min_validation_tokens"])
    assert split_for_training(_documents(600, 400), _documents(67, 400), None, False, config)[1] is not None  # headers
    assert split_for_training(_documents(600, 4), _documents(67, 4), None, False, config)[1] is None  # dates


@pytest.mark.parametrize("n_train, batch", [(68, 3), (30, 1), (1175, 20), (2000, 20)])
def test_batches_shrink_to_give_enough_steps(n_train: int, batch: int) -> None:
    config = TrainConfig(batch_size=20, min_steps_per_epoch=20)
    assert fitted_to_data(config, [2] * n_train, True).batch_size == batch
    assert fitted_to_data(replace(config, min_steps_per_epoch=0), [2] * n_train, True).batch_size == 20


@pytest.mark.parametrize("n_train, batch, epochs", [(1305, 20, 30), (1114, 20, 36), (448, 20, 60), (67, 3, 60)])
def test_without_validation_the_epochs_follow_a_step_budget(n_train: int, batch: int, epochs: int) -> None:
    """About 2,000 steps: ten times the data trains ten times fewer epochs, small data keeps
    ``max_epoch``; with validation (early stopping decides) ``max_epoch`` stays."""
    config = TrainConfig(batch_size=batch, max_epoch=60, steps_without_validation=2000)
    fitted = fitted_to_data(config, [2] * n_train, False)
    assert fitted.max_epoch == epochs
    steps = fitted.max_epoch * -(-n_train // batch)
    assert steps <= 2000 + -(-n_train // batch) or fitted.max_epoch == 60
    assert fitted_to_data(config, [2] * n_train, True).max_epoch == 60
    assert fitted_to_data(replace(config, steps_without_validation=0), [2] * n_train, False).max_epoch == 60
    assert fitted.lr_schedule == "linear" and fitted_to_data(config, [2] * n_train, True).lr_schedule == "constant"


def test_the_step_budget_counts_the_batches_the_data_leaves() -> None:
    """min_steps_per_epoch shrinks the batch first; the epochs are counted in those batches."""
    config = TrainConfig(batch_size=20, max_epoch=100, min_steps_per_epoch=20, steps_without_validation=400)
    fitted = fitted_to_data(config, [2] * 100, False)
    assert fitted.batch_size == 5 and fitted.max_epoch == 20  # 20 steps an epoch


def test_whole_documents_count_as_the_pieces_training_reads() -> None:
    """120 bibliographies of 2,000 tokens, read in pieces of 1,000: 240 sequences for the rules;
    batches of about 4,000 tokens (four pieces), and epochs that see about 3 million tokens."""
    config = TrainConfig(batch_size=20, max_epoch=60, max_sequence_length=1000, min_steps_per_epoch=20,
                         steps_without_validation=2000, tokens_without_validation=3_000_000, max_batch_tokens=4000)
    fitted = fitted_to_data(config, [2000] * 120, False)
    assert fitted.batch_size == 4  # 240 pieces // 20 steps = 12, then 4,000 tokens / 1,000 a piece
    assert fitted.max_epoch == 12  # 3,000,000 / 240,000 tokens (the step budget alone: 60 epochs of 60 steps)
    assert fitted_to_data(replace(config, tokens_without_validation=0), [2000] * 120, False).max_epoch == 33
    # the same tokens as short sequences: no cap binds, the rules of small data hold
    short = fitted_to_data(config, [20] * 1300, False)
    assert (short.batch_size, short.max_epoch) == (20, 31)
    # a validation share keeps max_epoch (early stopping decides) but batches still hold bounded tokens
    assert (fitted_to_data(config, [2000] * 120, True).batch_size, fitted_to_data(config, [2000] * 120, True).max_epoch) \
        == (4, 60)


@pytest.mark.parametrize("field", ["tokens_without_validation", "max_batch_tokens"])
def test_a_negative_token_rule_is_a_config_error(field: str) -> None:
    from textorch.errors import ConfigError

    with pytest.raises(ConfigError, match="must be >= 0"):
        TrainConfig(**{field: -1})


def test_a_linear_schedule_brings_the_rate_to_zero_at_the_last_step() -> None:
    import torch
    from textorch.train.trainer import adam

    model = torch.nn.Linear(2, 2)
    optimizer, scheduler = adam(model, TrainConfig(learning_rate=0.01, lr_schedule="linear"), 12)
    rates = []
    for _ in range(12):
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    assert rates[2] == pytest.approx(0.0075) and rates[5] == pytest.approx(0.005) and rates[-1] == 0.0
    assert all(a > b for a, b in zip(rates, rates[1:]))
    assert adam(model, TrainConfig(learning_rate=0.01), 12)[1] is None  # constant: no schedule


def test_training_without_validation_follows_the_linear_schedule(tmp_path: Path) -> None:
    corpus = read_labelled(write_tiny_conll(tmp_path / "train.conll", n=24))
    labeler = SequenceLabeler.build(corpus, ModelConfig(**SMALL), DataConfig(), seed=1)
    config = TrainConfig(max_epoch=3, batch_size=8, learning_rate=0.01, early_stop=False, lr_schedule="linear", seed=1)
    first = {k: v.clone() for k, v in labeler.model.state_dict().items()}
    result = labeler.fit(corpus, None, config)
    assert len(result.history) == 3 and result.best_epoch == 3
    assert any(not torch_equal(first[k], v) for k, v in labeler.model.state_dict().items())


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


@pytest.mark.parametrize("field, value", [("lr_schedule", "cosine"), ("steps_without_validation", -1)])
def test_bad_schedule_settings_are_refused(field: str, value: object) -> None:
    from textorch.errors import ConfigError
    with pytest.raises(ConfigError, match=field.replace("_", "[-_]") if field != "lr_schedule" else "lr-schedule"):
        TrainConfig(**{field: value})
