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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from textorch.cli.run_options import true_or_false

C = TypeVar("C")

FROM_MODEL = " (default: as the model was trained)"
"""What the help of an option whose value comes from the saved model when not given adds."""

_SWITCHES = ("store_true", "store_false")


def cli_fields(cls: type) -> Iterator[dataclasses.Field]:
    """The fields of ``cls`` that are command-line options, in declaration order."""
    return (f for f in dataclasses.fields(cls) if "cli" in f.metadata)


def add_config_options(parser: argparse.ArgumentParser, *config_classes: type, only: Sequence[str] | None = None,
                       helps: Mapping[str, str] | None = None, grouped: bool = True,
                       defaults_from_model: bool = False) -> None:
    """One option per CLI field of each class, in the classes' order; a field naming a ``group``
    goes into the argument group of that title (made on first use, so groups keep that order).

    A command that takes part of the fields, or gives some a narrower meaning, says so here rather
    than re-listing them: ``only`` names the fields to add, in the order of their options;
    ``helps`` replaces a field's help text for this command (the default is still the field's, and
    still written in); ``grouped=False`` ignores the fields' groups; ``defaults_from_model`` makes
    every option default to None (read the value saved with the model) and says so in its help.
    """
    fields = _chosen(config_classes, only)
    hints = {cls: typing.get_type_hints(cls) for cls in config_classes}
    groups: dict[str, argparse._ArgumentGroup] = {}
    for cls, f in fields:
        cli = f.metadata["cli"]
        target: argparse.ArgumentParser | argparse._ArgumentGroup = parser
        if grouped and "group" in cli:
            if cli["group"] not in groups:
                groups[cli["group"]] = parser.add_argument_group(cli["group"])
            target = groups[cli["group"]]
        text = _help((helps or {}).get(f.name, cli["help"]), f.default, cli.get("action"))
        default = None if defaults_from_model else _parser_default(f)
        target.add_argument(*_strings(f), dest=f.name, default=default,
                            help=text + FROM_MODEL if defaults_from_model else text,
                            **_typed(hints[cls][f.name], cli))


def config_from_args(cls: type[C], args: argparse.Namespace, **others: Any) -> C:
    """A ``cls`` from the parsed values of its CLI fields; ``others`` gives fields set another way
    (and wins over a parsed value), and the rest, options the command does not have included,
    keep their dataclass defaults."""
    values = {f.name: _field_value(f, getattr(args, f.name)) for f in cli_fields(cls) if hasattr(args, f.name)}
    return cls(**{**values, **others})


def _chosen(config_classes: tuple[type, ...], only: Sequence[str] | None) -> list[tuple[type, dataclasses.Field]]:
    """(class, field) of every CLI field, or of the ``only`` names in their order; a name that is no
    CLI field of these classes, or of two of them, is a programming error."""
    every = [(cls, f) for cls in config_classes for f in cli_fields(cls)]
    if only is None:
        return every
    chosen = []
    for name in only:
        matches = [(cls, f) for cls, f in every if f.name == name]
        if len(matches) != 1:
            raise ValueError(f"{name!r} is a command-line field of {len(matches)} of "
                             f"{', '.join(c.__name__ for c in config_classes)}, not of one")
        chosen.append(matches[0])
    return chosen


def _strings(f: dataclasses.Field) -> list[str]:
    """The option strings of a field: ``--field-name`` (or the ``flag`` it replaces) and its aliases."""
    cli = f.metadata["cli"]
    return [cli.get("flag", f"--{f.name.replace('_', '-')}"), *cli.get("aliases", ())]


def _parser_default(f: dataclasses.Field) -> Any:
    """The option's value when not given: the field's default, or ``cli_default`` where the command
    resolves the field itself; None for an ``append`` option (argparse appends to its default)."""
    cli = f.metadata["cli"]
    if cli.get("action") == "append":
        return None
    return cli["cli_default"] if "cli_default" in cli else f.default


def _field_value(f: dataclasses.Field, value: Any) -> Any:
    """The field's value from the parsed one: an appended list as a tuple, and "not given" (None
    from an option whose own default stands in for the field's) as the field's default."""
    cli = f.metadata["cli"]
    if value is None and (cli.get("action") == "append" or "cli_default" in cli):
        return f.default
    return tuple(value) if isinstance(value, list) else value


def _help(text: str, default: object, action: str | None = None) -> str:
    """The help with the default written in: at ``{default}``, else appended, unless the text already
    says what the default is, there is none to say, or the option is a switch (not giving it is
    the default)."""
    shown = str(default).lower() if isinstance(default, bool) else str(default)
    if "{default}" in text:
        return text.replace("{default}", shown)
    if "default" in text or default is None or action in _SWITCHES:
        return text
    return f"{text} (default: {shown})"


def _typed(annotation: object, cli: dict[str, Any]) -> dict[str, Any]:
    """argparse's ``type``, ``choices``, ``metavar`` and ``action`` for a field: booleans are spelled
    true|false, unless the field is a switch."""
    if cli.get("action") in _SWITCHES:
        return {"action": cli["action"]}
    kinds = [k for k in typing.get_args(annotation) if k is not type(None)] or [annotation]
    kind = kinds[0]
    extra: dict[str, Any] = {}
    if cli.get("action") == "append":
        extra["action"] = "append"
        kind = typing.get_args(annotation)[0]  # tuple[X, ...]: each use gives one X
    if kind is bool:
        extra.update(type=true_or_false, metavar="true|false")
    elif kind in (int, float):
        extra["type"] = kind
    if "choices" in cli:
        extra["choices"] = list(cli["choices"])
    if "metavar" in cli:
        extra["metavar"] = cli["metavar"]
    return extra
