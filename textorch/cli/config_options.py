"""Command-line options made from config dataclass fields, and configs made back from the parsed values.

A field becomes an option when it carries ``metadata["cli"]`` (see
:func:`textorch.train.config.option`): the option is ``--field-name`` (plus any aliases), its
default, type and choices are the field's, and its help says the default. The default is thus
written once, in the dataclass, and a command cannot drift from what the library does.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Iterator
from typing import Any, TypeVar

from textorch.cli.run_options import true_or_false

C = TypeVar("C")


def cli_fields(cls: type) -> Iterator[dataclasses.Field]:
    """The fields of ``cls`` that are command-line options, in declaration order."""
    return (f for f in dataclasses.fields(cls) if "cli" in f.metadata)


def add_config_options(parser: argparse.ArgumentParser, *config_classes: type) -> None:
    """One option per CLI field of each class, in the classes' order; a field naming a ``group``
    goes into the argument group of that title (made on first use, so groups keep that order)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for cls in config_classes:
        hints = typing.get_type_hints(cls)
        for f in cli_fields(cls):
            cli = f.metadata["cli"]
            target: argparse.ArgumentParser | argparse._ArgumentGroup = parser
            if "group" in cli:
                if cli["group"] not in groups:
                    groups[cli["group"]] = parser.add_argument_group(cli["group"])
                target = groups[cli["group"]]
            target.add_argument(f"--{f.name.replace('_', '-')}", *cli.get("aliases", ()), dest=f.name,
                                default=f.default, help=_help(cli["help"], f.default), **_typed(hints[f.name], cli))


def config_from_args(cls: type[C], args: argparse.Namespace, **others: Any) -> C:
    """A ``cls`` from the parsed values of its CLI fields; ``others`` gives fields set another way,
    and the rest keep their dataclass defaults."""
    return cls(**{f.name: getattr(args, f.name) for f in cli_fields(cls)}, **others)


def _help(text: str, default: object) -> str:
    """The help with the default written in: at ``{default}``, else appended, unless the text already
    says what the default is or there is none to say."""
    shown = str(default).lower() if isinstance(default, bool) else str(default)
    if "{default}" in text:
        return text.replace("{default}", shown)
    if "default" in text or default is None:
        return text
    return f"{text} (default: {shown})"


def _typed(annotation: object, cli: dict[str, Any]) -> dict[str, Any]:
    """argparse's ``type``, ``choices`` and ``metavar`` for a field: booleans are spelled true|false."""
    kinds = [k for k in typing.get_args(annotation) if k is not type(None)] or [annotation]
    kind = kinds[0]
    extra: dict[str, Any] = {}
    if kind is bool:
        extra.update(type=true_or_false, metavar="true|false")
    elif kind in (int, float):
        extra["type"] = kind
    if "choices" in cli:
        extra["choices"] = list(cli["choices"])
    if "metavar" in cli:
        extra["metavar"] = cli["metavar"]
    return extra
