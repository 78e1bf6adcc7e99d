"""The checkpoint options of the training commands, apart from the checkpointer itself.

A command line is parsed before any training code runs; these options are part of it, and
reading them must not import torch (which :mod:`textorch.train.checkpoint` needs to write state):
a tagging command parses the same command tree.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from textorch.errors import ConfigError


@dataclass(frozen=True)
class CheckpointOptions:
    """Where and how often a training run saves checkpoints, and whether it resumes."""

    directory: str | None = None
    """Checkpoint directory (default: ``OUTPUT/checkpoints``; needed without ``--output``)."""
    every_steps: int = 0
    """Also checkpoint every N optimizer steps (0: at the end of each epoch only)."""
    keep_last: int = 2
    """In-progress checkpoints kept; older ones are deleted."""
    resume: bool = False
    """Continue from the newest checkpoint of the same run."""
    keep: bool = False
    """Keep the checkpoints after a successful run (default: deleted)."""

    def __post_init__(self) -> None:
        if self.every_steps < 0:
            raise ConfigError(f"--checkpoint-every-steps must be >= 0, got {self.every_steps}")
        if self.keep_last < 1:
            raise ConfigError(f"--keep-last must be >= 1, got {self.keep_last}")


def add_checkpoint_options(parser: argparse.ArgumentParser) -> None:
    """``--resume``, ``--checkpoint-dir``, ``--checkpoint-every-steps``, ``--keep-last``, ``--keep-checkpoints``."""
    d = CheckpointOptions()
    group = parser.add_argument_group("checkpoints")
    group.add_argument("--resume", action="store_true",
                       help="continue from the newest checkpoint of this same command (or report that it finished)")
    group.add_argument("--checkpoint-dir", default=d.directory, metavar="DIR",
                       help="where checkpoints go (default: OUTPUT/checkpoints; without --output, no checkpoints unless given)")
    group.add_argument("--checkpoint-every-steps", type=int, default=d.every_steps, metavar="N",
                       help="also checkpoint every N optimizer steps (default: 0, at each epoch end only)")
    group.add_argument("--keep-last", type=int, default=d.keep_last, metavar="K",
                       help=f"checkpoints kept while training (default: {d.keep_last})")
    group.add_argument("--keep-checkpoints", action="store_true",
                       help="keep the checkpoints after a successful run (default: deleted; never inside the model directory)")


def checkpoint_options(args: argparse.Namespace) -> CheckpointOptions:
    return CheckpointOptions(directory=args.checkpoint_dir, every_steps=args.checkpoint_every_steps,
                             keep_last=args.keep_last, resume=args.resume, keep=args.keep_checkpoints)


def refuse_checkpoint_options(args: argparse.Namespace, mode: str) -> None:
    """Training modes without checkpoints yet: say so rather than ignore the options."""
    given = [flag for flag, value in (("--resume", args.resume), ("--checkpoint-dir", args.checkpoint_dir),
                                      ("--checkpoint-every-steps", args.checkpoint_every_steps),
                                      ("--keep-checkpoints", args.keep_checkpoints)) if value]
    if given:
        raise ConfigError(f"{', '.join(given)}: checkpoints are not available with {mode} yet")
