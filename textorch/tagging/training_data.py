"""The training data of a tagger's run shaped for it: the hold-out splits, and the training
options fitted to what is left (batch size, epochs without validation).

Every training door reaches these through :mod:`textorch.tagging.training`; the benchmarks that
size a run as textorch would (``benchmarks/peers``) call them too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from textorch.data.corpus import Corpus
from textorch.data.splits import piece_lengths, training_splits
from textorch.errors import ConfigError
from textorch.tagging.config import TrainConfig

logger = logging.getLogger(__name__)


def split_for_training(
    train: Corpus, valid: Corpus | None, test: Corpus | None, hold_out_test: bool, train_config: TrainConfig,
    fold_count: int = 1,
) -> tuple[Corpus, Corpus | None, Corpus | None]:
    """Test and validation shares by :func:`~textorch.data.splits.training_splits`; n-fold needs no
    validation share (each fold validates on its own part), and a validation file then joins the
    training data, as DeLFT's n-fold training does. Validation data smaller than
    ``train_config.min_validation_sequences`` (and ``min_validation_tokens``) joins the training
    data too (no early stopping)."""
    wants_valid = fold_count == 1 and train_config.early_stop
    train, valid, test = training_splits(train, valid, test, hold_out_test=hold_out_test, seed=train_config.seed,
                                         valid_fraction=train_config.valid_fraction if wants_valid else None)
    if wants_valid and valid is None:
        logger.info("%s: %d training sequence(s), too few to hold out validation data: no early stopping, the last "
                    "epoch is kept", train.path, len(train))
    too_small = valid is not None and too_small_to_validate(valid, train_config)
    if too_small:  # a --valid file too: whoever gave it, a handful of sequences cannot pick an epoch
        logger.info("validation data of %d sequences is too few to pick an epoch (fewer than %d%s): training on "
                    "all %d sequences", len(valid), train_config.min_validation_sequences,
                    f", and fewer than {train_config.min_validation_tokens:,} tokens"
                    if train_config.min_validation_tokens else "", len(train) + len(valid))
    if (fold_count > 1 or too_small) and valid is not None:
        train, valid = replace(train, sequences=train.sequences + valid.sequences), None
    if not train.sequences:
        raise ConfigError(f"{train.path}: no training sequences left after splitting")
    return train, valid, test


LONG_RUN_TEMPLATE_RATE = 0.1
"""The template table's rate, as a share of the common one, in a run of ``tokens_with_validation``
where no ``template_learning_rate`` is given."""


TEMPLATE_ONLY_L1 = 0.5
"""The L1 penalty of template-only training where none is given: Wapiti's default, which GROBID
trains its CRF with."""


def too_small_to_validate(valid: Corpus, train_config: TrainConfig) -> bool:
    """Whether ``valid`` is too small to pick an epoch: fewer sequences than
    ``min_validation_sequences`` and, where ``min_validation_tokens`` is set, fewer tokens too
    (a few dozen whole documents are enough, as many short strings are not)."""
    if len(valid) >= train_config.min_validation_sequences:
        return False
    tokens = train_config.min_validation_tokens
    return not tokens or sum(len(s) for s in valid.sequences) < tokens


def fitted_to_data(train_config: TrainConfig, train_lengths: Sequence[int], has_valid: bool) -> TrainConfig:
    """``train_config`` for training sequences of ``train_lengths`` tokens: no early stopping
    without validation data (``has_valid`` False: a share too small to be held out; n folds
    validate on their own), a batch size that gives at least ``min_steps_per_epoch`` steps and
    holds about ``max_batch_tokens`` tokens at most, and, without validation, the epochs that make
    about ``steps_without_validation`` steps (and see at most about ``tokens_without_validation``
    tokens) at a linearly falling rate; with validation and ``tokens_with_validation``, the epochs
    that see about that many tokens at a linearly falling rate, none stopped early, the CRF
    template table at a tenth of the rate unless ``template_learning_rate`` is set; without
    validation and with pieces of ``template_only_from_tokens`` tokens on average or more, the CRF
    over the template features alone (``template_only``, at ``TEMPLATE_ONLY_L1``). Sequences count as the pieces of ``max_sequence_length``
    tokens that training cuts them into, so a corpus of whole documents is sized by what a step
    reads, not by how many documents it has."""
    changes: dict[str, object] = {}
    if not has_valid and train_config.early_stop:
        changes["early_stop"] = False
    pieces = piece_lengths(train_lengths, train_config.max_sequence_length)
    n_train, n_tokens = len(pieces), sum(pieces)
    batch = train_config.batch_size
    if train_config.min_steps_per_epoch:
        batch = max(1, min(batch, n_train // train_config.min_steps_per_epoch))
    if train_config.max_batch_tokens and n_tokens:
        batch = max(1, min(batch, round(train_config.max_batch_tokens * n_train / n_tokens)))
    if batch != train_config.batch_size:
        logger.info("batch size %d for %d training sequences of %d tokens on average (at least %d steps an epoch, "
                    "about %s tokens a batch at most)", batch, n_train, round(n_tokens / max(n_train, 1)),
                    train_config.min_steps_per_epoch, _count_or_any(train_config.max_batch_tokens))
        changes["batch_size"] = batch
    if (not has_valid and not train_config.template_only and train_config.template_only_from_tokens and n_train
            and n_tokens / n_train >= train_config.template_only_from_tokens):
        logger.info("training sequences of %d tokens on average and no validation data (at least %d tokens: the "
                    "CRF over the template features alone, the recurrent emissions off)", round(n_tokens / n_train),
                    train_config.template_only_from_tokens)
        changes["template_only"] = True
    if (train_config.template_only or changes.get("template_only")) and not train_config.template_l1:
        changes["template_l1"] = TEMPLATE_ONLY_L1
    if not has_valid and train_config.steps_without_validation:
        steps_per_epoch = max(1, -(-n_train // batch))
        epochs = max(1, min(train_config.max_epoch, round(train_config.steps_without_validation / steps_per_epoch)))
        if train_config.tokens_without_validation and n_tokens:
            epochs = max(1, min(epochs, round(train_config.tokens_without_validation / n_tokens)))
        logger.info("%d epochs of %d steps for %d training sequences without validation (about %d steps, at most "
                    "about %s tokens), the learning rate falling linearly to zero", epochs, steps_per_epoch, n_train,
                    train_config.steps_without_validation, _count_or_any(train_config.tokens_without_validation))
        changes.update(max_epoch=epochs, lr_schedule="linear")
    if has_valid and train_config.early_stop and train_config.tokens_with_validation and n_tokens:
        epochs = max(1, min(train_config.max_epoch, round(train_config.tokens_with_validation / n_tokens)))
        logger.info("%d epochs of %d training tokens with validation (about %s tokens), the learning rate falling "
                    "linearly to zero; the epoch that validates best is kept", epochs, n_tokens,
                    _count_or_any(train_config.tokens_with_validation))
        changes.update(max_epoch=epochs, lr_schedule="linear", patience=epochs)
        if not train_config.template_learning_rate:
            # Over such a long run Adam drifts the template table's weights once their gradients
            # fade; at a tenth of the rate they hold (docs/performance.md, "GROBID's big models").
            changes["template_learning_rate"] = train_config.learning_rate * LONG_RUN_TEMPLATE_RATE
    return replace(train_config, **changes) if changes else train_config


def _count_or_any(n: int) -> str:
    return f"{n:,}" if n else "any"
