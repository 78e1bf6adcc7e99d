"""Options of the training commands for n-fold, incremental training and TensorBoard logging.

Shared by ``seq train``/``seq train-eval`` and the ``grobid`` and ``ner`` applications (and, for
``--tensorboard``, ``cls``), so that each option is spelled and documented once.
"""

from __future__ import annotations

import argparse

from textorch.train.fold_spread import FOLD_PARALLEL_MODES, check_fold_parallel


def add_tensorboard_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tensorboard", default=None, metavar="DIR",
                        help="also log loss, validation score and learning rate per epoch as TensorBoard events "
                             "in DIR (needs the tensorboard package: pip install 'textorch[tensorboard]')")


def add_seq_run_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("n-fold and incremental training")
    group.add_argument("--fold-count", type=int, default=1, metavar="N",
                       help="train N models, each validated on its own fold of the training data; print per-fold "
                            "scores with mean ± sd per label and keep the model with the best validation F1 (default: 1)")
    add_fold_parallel_option(group)
    group.add_argument("--incremental", action="store_true",
                       help="continue training the model of --input-model on this data; new characters, labels and "
                            "feature values extend its vocabularies (architecture and sizes come from that model)")
    group.add_argument("--input-model", default=None, metavar="DIR",
                       help="model directory to continue from with --incremental")
    add_tensorboard_option(parser)


def add_fold_parallel_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--fold-parallel`` (n-fold training with ``--devices N``), shared by ``seq``, ``cls`` and the applications."""
    parser.add_argument("--fold-parallel", choices=FOLD_PARALLEL_MODES, default="auto",
                        help="with --devices N: train whole folds side by side, fold i on process (i-1) mod N, each "
                             "as one process trains it (same scores as --devices 1), instead of each fold in turn on "
                             "all N processes (false); auto: side by side when --fold-count >= N (default: auto)")


def fold_parallel_option(args: argparse.Namespace) -> str:
    """``--fold-parallel``, refused early (before any reading) when there are no folds to spread."""
    check_fold_parallel(args.fold_parallel, args.fold_count)
    return args.fold_parallel


def incremental_input(args: argparse.Namespace) -> str | None:
    """The model to continue from, after checking that the two options come together."""
    from textorch.errors import ConfigError

    if args.incremental and not args.input_model:
        raise ConfigError("--incremental needs --input-model DIR (the model to continue training)")
    if args.input_model and not args.incremental:
        raise ConfigError("--input-model is read with --incremental only; add --incremental to continue training it")
    return args.input_model
