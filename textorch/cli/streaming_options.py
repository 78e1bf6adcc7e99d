"""The options of every command that streams its input: the chunk's bounds and the progress bar.

``seq tag``, ``seq eval``, ``grobid MODEL tag|eval``, ``ner eval``, ``cls classify`` and ``cls
eval`` read their input a chunk at a time (:class:`textorch.data.streams.ChunkSize`, one rule
for tagging and classification), so they take the same two options, spelled once here.
``--chunk-size N``, the classification commands' former spelling, stays accepted so that
scripts written for it keep running: hidden from the help, it sets ``--chunk-sequences N`` and
the run says once that it is deprecated.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from textorch.data.streams import ChunkSize
from textorch.errors import ConfigError
from textorch.train.dist import context_from_env

logger = logging.getLogger(__name__)

DEPRECATED_CHUNK_SIZE = "--chunk-size"
"""The former classification option, now an alias of ``--chunk-sequences``."""


class _ChunkSizeAlias(argparse.Action):
    """``--chunk-size N``: sets ``chunk_sequences`` and records that the old spelling was used,
    for :func:`chunk_size` to warn about once logging is set up (parsing comes before it). The
    old option took 1, which the chunk rule never allows (a chunk holds two texts at least, so
    that no text is scored alone): 1 is read as 2, which changes no answer."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        value = int(values)  # type: ignore[arg-type]
        setattr(namespace, "chunk_sequences", 2 if value == 1 else value)
        setattr(namespace, "deprecated_chunk_size", value)


def add_streaming_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, unit: str = "sequences",
                          verb: str = "tag", with_chunk_size_alias: bool = False) -> None:
    """``--chunk-sequences``, ``--chunk-tokens`` and ``--quiet``; ``unit`` names the items
    (sequences, or texts, whose tokens are their words), ``verb`` what the command does to them.
    ``with_chunk_size_alias``: also accept the deprecated ``--chunk-size`` (the commands that had it)."""
    default = ChunkSize()
    parser.add_argument("--chunk-sequences", type=int, default=default.sequences, metavar="N",
                        help=f"read and {verb} the input in chunks of at most N {unit} (default: {default.sequences})")
    tokens = "tokens (words)" if unit == "texts" else "tokens"
    parser.add_argument("--chunk-tokens", type=int, default=default.tokens, metavar="N",
                        help=f"... or of about N {tokens}, whichever comes first: memory does not grow with the "
                             f"input (default: {default.tokens})")
    if with_chunk_size_alias:
        parser.add_argument(DEPRECATED_CHUNK_SIZE, type=int, action=_ChunkSizeAlias, dest="chunk_sequences",
                            default=argparse.SUPPRESS, metavar="N", help=argparse.SUPPRESS)
    parser.add_argument("--quiet", action="store_true", help="no progress bar (there is none when stderr is not a terminal)")


def chunk_size(args: argparse.Namespace) -> ChunkSize:
    """The chunk bounds the command line asked for, checked before a model is loaded; when
    ``--chunk-size`` was used, the warning that it is deprecated (from the first process of a
    multi-process run only: each would say the same)."""
    if getattr(args, "deprecated_chunk_size", None) is not None and context_from_env().is_main:
        logger.warning("%s is deprecated: use --chunk-sequences %d (a chunk also closes at --chunk-tokens, "
                       "default %d)", DEPRECATED_CHUNK_SIZE, args.chunk_sequences, ChunkSize().tokens)
    if args.chunk_sequences < 2:
        raise ConfigError(f"--chunk-sequences must be >= 2 (a chunk never holds one sequence alone), "
                          f"got {args.chunk_sequences}")
    if args.chunk_tokens < 1:
        raise ConfigError(f"--chunk-tokens must be >= 1, got {args.chunk_tokens}")
    return ChunkSize(args.chunk_sequences, args.chunk_tokens)
