"""Options of the training commands for n-fold, incremental training and TensorBoard logging.

Shared by ``seq train``/``seq train-eval`` and the ``grobid`` and ``ner`` applications (and, for
``--tensorboard``, ``cls``), so that each option is spelled and documented once.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from textorch.errors import ConfigError
from textorch.train.fold_spread import FOLD_PARALLEL_MODES, check_fold_parallel


def true_or_false(value: str) -> bool:
    """An argparse type for options spelled ``--early-stop true|false``."""
    lowered = value.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def check_at_least_one(args: argparse.Namespace, *names: str) -> None:
    """A ``ConfigError`` naming the option when one of ``names`` (``batch_size``...) is below 1:
    checked before a model is loaded, whichever engine would run it (PyTorch would raise its own
    ``ValueError`` deep inside, ONNX Runtime would run on)."""
    for name in names:
        value = getattr(args, name)
        if value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}")


def refuse_output_over_input(input_path: str, output: str | None, output_option: str = "--output") -> None:
    """A ``ConfigError`` naming both when the output file is the input file (the same path, or
    another name of the same file): the finished output would replace the input, which is read
    as the output is written."""
    if not output:
        return
    source, target = Path(input_path), Path(output)
    try:
        same = (os.path.samefile(source, target) if source.exists() and target.exists()
                else source.resolve() == target.resolve())
    except (OSError, ValueError):  # a path the system refuses: the reader or the writer names it
        return
    if same:
        raise ConfigError(f"{output_option} {output} is the input file --input {input_path}: the output would "
                          "replace it; write the output elsewhere")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Where a command runs: device, threads, embeddings cache, and the distributed options."""
    from textorch.train.launch import add_distributed_options

    parser.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                        help="compute device; auto: a GPU when one is visible, else the CPU (default: auto)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads per process (default: torch's choice; with --devices N, cores / N)")
    parser.add_argument("--cache-dir", default=None,
                        help="textorch's cache root, holding embeddings/ and delft-imports/ "
                        "(default: $TEXTORCH_CACHE_DIR, else ~/.cache/textorch)")
    add_distributed_options(parser)


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


def add_train_commands(
    commands: argparse._SubParsersAction,
    train: Callable[[argparse.Namespace, bool], int],
    add_options: Callable[[argparse.ArgumentParser], None],
    what: str,
    data: str,
    split: str,
) -> None:
    """``train`` and ``train-eval``, spelled the same way for taggers and classifiers.

    ``what``: the model ("a tagger"), ``data``: the training file ("labelled training file
    (CoNLL or GROBID)"), ``split``: how held-out parts are drawn ("held out by seed").
    """
    from textorch.train.checkpoint_options import add_checkpoint_options

    p = commands.add_parser("train", help=f"train {what} and save it")
    p.add_argument("--train", required=True, help=data)
    p.add_argument("--valid", help=f"validation file for early stopping (default: 10%% of --train, {split})")
    p.add_argument("--output", required=True, help="model directory to write")
    add_options(p)
    add_checkpoint_options(p)
    p.set_defaults(run=lambda a: train(a, False), trains=True)

    p = commands.add_parser("train-eval", help="train, then evaluate on --test (default: 10%% of --train held out)")
    p.add_argument("--train", required=True, help=data)
    p.add_argument("--valid", help="validation file for early stopping")
    p.add_argument("--test", help=f"test file (default: 10%% of --train, {split})")
    p.add_argument("--output", help="model directory to write (optional)")
    p.add_argument("--metrics-json", help="write the test scores as JSON here")
    add_options(p)
    add_checkpoint_options(p)
    p.set_defaults(run=lambda a: train(a, True), trains=True)


def print_architectures(registry: dict) -> int:
    """One line per architecture name: the name, then its description."""
    width = max(len(name) for name in registry)
    for name, arch in registry.items():
        print(f"{name:<{width}}  {arch.description}")
    return 0
