"""The training options of ``seq train`` (and ``grobid``, ``ner``) come from the config dataclasses:
same names, defaults, types and choices, and a parsed command line gives back the configs."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from textorch.cli import apps, seq
from textorch.cli.config_options import add_config_options, cli_fields, config_from_args
from textorch.cli.main import _build_parser
from textorch.models.architecture_table import ARCHITECTURES
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.train.config import option

CLASSES = (ModelConfig, TrainConfig, DataConfig)

# Every option string of the config options, as the command line spelt them before they were
# derived from the dataclasses: renaming a field must not rename (or drop) an option.
OPTION_STRINGS = {
    "format": ["--format"], "architecture": ["--architecture"], "embeddings": ["--embeddings"],
    "word_lookup": ["--word-lookup"], "feature_columns": ["--feature-columns", "--features-indices"],
    "crf_template": ["--crf-template"], "crf_transitions": ["--crf-transitions"],
    "feature_vocabulary_size": ["--feature-vocabulary-size", "--features-vocabulary-size"],
    "max_epoch": ["--max-epoch"], "batch_size": ["--batch-size"], "learning_rate": ["--learning-rate"],
    "patience": ["--patience"], "early_stop": ["--early-stop"], "max_sequence_length": ["--max-sequence-length"],
    "clip_grad": ["--clip-grad"], "lr_decay": ["--lr-decay"], "lr_decay_patience": ["--lr-decay-patience"],
    "min_validation_sequences": ["--min-validation-sequences"], "min_validation_tokens": ["--min-validation-tokens"],
    "tokens_with_validation": ["--tokens-with-validation"], "template_learning_rate": ["--template-learning-rate"],
    "min_steps_per_epoch": ["--min-steps-per-epoch"],
    "steps_without_validation": ["--steps-without-validation"], "lr_schedule": ["--lr-schedule"],
    "tokens_without_validation": ["--tokens-without-validation"], "max_batch_tokens": ["--max-batch-tokens"],
    "template_only": ["--template-only"], "template_l1": ["--template-l1"],
    "template_only_from_tokens": ["--template-only-from-tokens"],
    "bucket_batches": ["--bucket-batches"], "dropout": ["--dropout"], "seed": ["--seed"],
    "grad_accum": ["--grad-accum"], "precision": ["--precision"], "transformer": ["--transformer"],
    "transformer_window": ["--transformer-window"], "transformer_stride": ["--transformer-stride"],
    "transformer_learning_rate": ["--transformer-learning-rate"], "warmup_fraction": ["--warmup-fraction"],
    "transformer_dropout": ["--transformer-dropout"],
}
CHOICES = {"format": ["conll", "grobid"], "word_lookup": ["exact_or_lower", "delft"],
           "lr_schedule": ["constant", "linear"], "crf_transitions": ["iob2", "learned"], "precision": ["fp32", "bf16", "fp16"],
           "architecture": list(ARCHITECTURES)}


def _subcommand(argv: list[str]) -> argparse.ArgumentParser:
    """The parser of ``textorch argv...`` (a group and its command, or an application)."""
    parser = _build_parser(argv)
    for word in argv:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions}


def _exposed() -> list[tuple[type, dataclasses.Field]]:
    return [(cls, f) for cls in CLASSES for f in cli_fields(cls)]


def test_the_exposed_fields_are_the_options_seq_train_had() -> None:
    assert sorted(f.name for _, f in _exposed()) == sorted(OPTION_STRINGS)
    actions = _actions(_subcommand(["seq", "train"]))
    for dest, strings in OPTION_STRINGS.items():
        assert actions[dest].option_strings == strings, dest
        assert (actions[dest].choices and list(actions[dest].choices)) == CHOICES.get(dest), dest


@pytest.mark.parametrize("command", [["seq", "train"], ["seq", "train-eval"]])
def test_parser_defaults_are_the_dataclass_defaults(command: list[str]) -> None:
    actions = _actions(_subcommand(command))
    for _, f in _exposed():
        assert actions[f.name].default == f.default, f.name
        assert type(actions[f.name].default) is type(f.default), f.name


def test_no_options_give_the_default_configs(tmp_path) -> None:
    """``seq train --train X`` with nothing else: the library's configs, bar what the command sets
    by design (``--tensorboard``, whose default is also None)."""
    argv = ["seq", "train", "--train", "x.txt", "--output", str(tmp_path)]
    args = _build_parser(argv).parse_args(argv)
    assert seq.configs_from_args(args) == (ModelConfig(), TrainConfig(), DataConfig())


def _other_value(f: dataclasses.Field, choices: list[str] | None) -> tuple[str, object]:
    """A valid value other than the default, as typed on the command line and as parsed."""
    if choices:
        value = next(c for c in choices if c != f.default)
        return value, value
    if isinstance(f.default, bool):
        return str(not f.default).lower(), not f.default
    if isinstance(f.default, int):
        return str(f.default + 1), f.default + 1
    if isinstance(f.default, float):
        return str(f.default / 2), f.default / 2
    return "some-value", "some-value"


def test_every_option_reaches_its_config_field(tmp_path) -> None:
    argv = ["seq", "train", "--train", "x.txt", "--output", str(tmp_path), "--tensorboard", "tb"]
    expected: dict[str, object] = {}
    for _, f in _exposed():
        typed, parsed = _other_value(f, CHOICES.get(f.name))
        argv += [OPTION_STRINGS[f.name][-1], typed]  # the alias where there is one
        expected[f.name] = parsed
    model, train, data = seq.configs_from_args(_build_parser(argv).parse_args(argv))
    for config in (model, train, data):
        for f in cli_fields(type(config)):
            assert getattr(config, f.name) == expected[f.name], f.name
    assert train.tensorboard_dir == "tb"


@pytest.mark.parametrize("argv", [["--precision", "fp64"], ["--early-stop", "maybe"], ["--batch-size", "1.5"],
                                  ["--architecture", "NoSuchNet"], ["--learning-rate", "fast"]])
def test_bad_values_are_refused_by_the_parser(argv: list[str], tmp_path) -> None:
    full = ["seq", "train", "--train", "x.txt", "--output", str(tmp_path), *argv]
    with pytest.raises(SystemExit):
        _build_parser(full).parse_args(full)


@pytest.mark.parametrize("command", [["grobid"], ["ner"]])
def test_applications_keep_the_library_defaults_they_do_not_set(command: list[str]) -> None:
    actions = _actions(_subcommand(command))
    for _, f in _exposed():
        if f.name in apps._APP_DEFAULTED:
            assert actions[f.name].default is None, f.name
            assert "(default: DeLFT's value" in actions[f.name].help, f.name
        elif f.name != "architecture" and f.name != "format":  # the applications choose these two
            assert actions[f.name].default == f.default, f.name


def test_help_states_the_default_where_the_text_does_not() -> None:
    @dataclasses.dataclass(frozen=True)
    class Example:
        size: int = option(7, "how big")
        rate: float = option(0.5, "how fast (1: constant; default: {default})", metavar="R")
        on: bool = option(False, "switch")
        path: str | None = option(None, "where to", group="places")
        mode: str = option("a", "a or b (a: the default)", choices=("a", "b"), aliases=("--style",))
        hidden: int = 3

    parser = argparse.ArgumentParser()
    add_config_options(parser, Example)
    actions = _actions(parser)
    assert "hidden" not in actions
    assert actions["size"].help == "how big (default: 7)"
    assert actions["rate"].help == "how fast (1: constant; default: 0.5)" and actions["rate"].metavar == "R"
    assert actions["on"].help == "switch (default: false)" and actions["on"].metavar == "true|false"
    assert actions["path"].help == "where to"
    assert [g.title for g in parser._action_groups if actions["path"] in g._group_actions] == ["places"]
    assert actions["mode"].help == "a or b (a: the default)" and actions["mode"].option_strings == ["--mode", "--style"]
    args = parser.parse_args(["--size", "9", "--on", "true", "--style", "b"])
    assert config_from_args(Example, args) == Example(size=9, rate=0.5, on=True, path=None, mode="b")
    assert config_from_args(Example, args, hidden=4).hidden == 4


def test_a_command_takes_part_of_the_fields_in_its_order_with_its_own_spelling_and_help() -> None:
    @dataclasses.dataclass(frozen=True)
    class Reading:
        names: tuple[str, ...] = option((), "a name; repeat for more", flag="--name", action="append", metavar="N")
        header: bool = option(True, "files have no header row", flag="--no-header", action="store_false")
        kind: str = option("a", "which kind (default: {default})", choices=("a", "b"), cli_default=None)
        size: int = option(3, "how big", group="shape")
        other: int = option(1, "not taken here")

    parser = argparse.ArgumentParser()
    add_config_options(parser, Reading, only=("size", "names", "header", "kind"), helps={"size": "rows"}, grouped=False)
    actions = _actions(parser)
    assert [a.dest for a in parser._actions[1:]] == ["size", "names", "header", "kind"]  # `only`'s order, no `other`
    assert actions["size"].help == "rows (default: 3)" and actions["size"] in parser._optionals._group_actions
    assert actions["names"].option_strings == ["--name"] and actions["names"].metavar == "N"
    assert actions["header"].option_strings == ["--no-header"] and actions["header"].help == "files have no header row"
    assert actions["kind"].help == "which kind (default: a)" and actions["kind"].default is None
    assert config_from_args(Reading, parser.parse_args([])) == Reading()  # not given: the dataclass defaults
    given = parser.parse_args(["--name", "x", "--name", "y", "--no-header", "--kind", "b", "--size", "5"])
    assert config_from_args(Reading, given) == Reading(names=("x", "y"), header=False, kind="b", size=5)
    assert config_from_args(Reading, given, kind="a").kind == "a"  # set by the command: wins over the parsed value
    with pytest.raises(ValueError, match="'missing'"):
        add_config_options(argparse.ArgumentParser(), Reading, only=("missing",))

    saved = argparse.ArgumentParser()
    add_config_options(saved, Reading, only=("names", "header"), defaults_from_model=True)
    assert [a.default for a in saved._actions[1:]] == [None, None]
    assert all(a.help.endswith("(default: as the model was trained)") for a in saved._actions[1:])
