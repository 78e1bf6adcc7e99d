"""The options of ``cls train`` / ``train-eval`` / ``eval`` come from the classification config
dataclasses (and the shared ``TrainConfig``): each field's option is in the command's help with
the field's own default, and a command line without options gives the library's configs."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from textorch.classification.config import ClsDataConfig, ClsModelConfig
from textorch.cli import cls
from textorch.cli.config_options import FROM_MODEL, cli_fields
from textorch.cli.main import _build_parser, main
from textorch.train.config import TrainConfig

# Every option string as the command line spelt them when they were hand-written: deriving them
# from the dataclasses must not rename or drop one.
OPTION_STRINGS = {
    "architecture": "--architecture", "hidden": "--hidden", "dense_size": "--dense-size", "dropout": "--dropout",
    "max_length": "--max-length", "word_dim": "--word-dim", "transformer": "--transformer",
    "fold_count": "--fold-count", "format": "--format", "text_column": "--text-column",
    "label_columns": "--label-column", "header": "--no-header", "embeddings": "--embeddings",
    "class_weights": "--class-weights", "max_epoch": "--max-epoch", "batch_size": "--batch-size",
    "learning_rate": "--learning-rate", "transformer_learning_rate": "--transformer-learning-rate",
    "patience": "--patience", "early_stop": "--early-stop", "clip_grad": "--clip-grad", "lr_decay": "--lr-decay",
    "lr_decay_patience": "--lr-decay-patience", "bucket_batches": "--bucket-batches", "seed": "--seed",
    "grad_accum": "--grad-accum", "precision": "--precision",
}


def _fields() -> list[dataclasses.Field]:
    """Every classification config field with CLI metadata, and the shared fields ``cls train`` takes."""
    own = [f for config in (ClsModelConfig, ClsDataConfig) for f in cli_fields(config)]
    shared = [f for f in cli_fields(TrainConfig) if f.name in cls.TRAIN_FIELDS]
    return own + shared


def _help_entries(argv: list[str], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The printed ``--help`` of a command, one entry per option (keyed by its first option string),
    whitespace folded; wide enough that argparse does not wrap a line."""
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    entries: dict[str, str] = {}
    key = None
    for line in capsys.readouterr().out.split("options:", 1)[1].splitlines():
        start = re.match(r"^  (-[-\w]+)", line)
        if start:
            key = start.group(1)
            entries[key] = ""
        if key is not None:
            entries[key] += " " + line.strip()
    return {k: " ".join(v.split()) for k, v in entries.items()}


def _shown(default: object) -> str:
    return str(default).lower() if isinstance(default, bool) else str(default)


def _parsed(argv: list[str]) -> argparse.Namespace:
    return _build_parser(argv).parse_args(argv)


def test_the_options_are_those_the_commands_had() -> None:
    assert sorted(f.name for f in _fields()) == sorted(OPTION_STRINGS)


@pytest.mark.parametrize("command", ["train", "train-eval"])
def test_each_field_is_in_the_help_of_cls_train_with_its_dataclass_default(
        command: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    entries = _help_entries(["cls", command], capsys, monkeypatch)
    for f in _fields():
        entry = entries[OPTION_STRINGS[f.name]]
        if f.default is None or f.metadata["cli"].get("action") in ("append", "store_false"):
            # a default said in words (from the file name, text, label...) or a switch: the field's text
            assert f.metadata["cli"]["help"] in entry, f.name
        else:
            assert f"default: {_shown(f.default)}" in entry, (f.name, entry)


@pytest.mark.parametrize("command", ["train", "train-eval"])
def test_no_options_give_the_library_configs(command: str, tmp_path) -> None:
    args = _parsed(["cls", command, "--train", "x.csv", "--output", str(tmp_path)])
    for f in _fields():  # the parser's own value: None where the command resolves it or appends to it
        cli = f.metadata["cli"]
        expected = None if cli.get("action") == "append" else cli.get("cli_default", f.default)
        assert getattr(args, f.name) == expected, f.name
    assert cls._configs(args) == (ClsModelConfig(), TrainConfig(), ClsDataConfig())


def test_every_option_reaches_its_config_field(tmp_path) -> None:
    argv = ["cls", "train", "--train", "x.csv", "--output", str(tmp_path), "--format", "tsv", "--text-column", "body",
            "--label-column", "a", "--label-column", "b", "--no-header", "--embeddings", "glove", "--class-weights",
            "none", "--architecture", "cnn", "--hidden", "7", "--dense-size", "5", "--dropout", "0.1", "--max-length",
            "9", "--word-dim", "11", "--fold-count", "3", "--max-epoch", "4", "--batch-size", "6", "--learning-rate",
            "0.5", "--transformer-learning-rate", "0.25", "--patience", "2", "--early-stop", "false", "--clip-grad",
            "1.5", "--lr-decay", "0.5", "--lr-decay-patience", "1", "--bucket-batches", "2", "--seed", "8",
            "--grad-accum", "2", "--precision", "bf16", "--tensorboard", "tb"]
    model, train, data = cls._configs(_parsed(argv))
    assert model == ClsModelConfig(architecture="cnn", hidden=7, dense_size=5, dropout=0.1, max_length=9, word_dim=11,
                                   fold_count=3)
    assert data == ClsDataConfig(format="tsv", text_column="body", label_columns=("a", "b"), header=False,
                                 embeddings="glove", class_weights="none")
    assert train == TrainConfig(max_epoch=4, batch_size=6, learning_rate=0.5, transformer_learning_rate=0.25,
                                patience=2, early_stop=False, clip_grad=1.5, lr_decay=0.5, lr_decay_patience=1,
                                bucket_batches=2, seed=8, grad_accum=2, precision="bf16", tensorboard_dir="tb")


@pytest.mark.parametrize(("extra", "architecture"), [([], "gru"), (["--transformer", "enc"], "bert"),
                                                     (["--transformer", "enc", "--architecture", "bert"], "bert"),
                                                     (["--architecture", "lstm"], "lstm")])
def test_transformer_alone_means_bert(extra: list[str], architecture: str, tmp_path) -> None:
    args = _parsed(["cls", "train", "--train", "x.csv", "--output", str(tmp_path), *extra])
    assert cls._configs(args)[0].architecture == architecture


def test_eval_reads_the_columns_the_model_was_trained_with_unless_told(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    args = _parsed(["cls", "eval", "--model", "m", "--test", "t.csv"])
    assert (args.format, args.text_column, args.label_columns, args.header) == (None, None, None, None)
    entries = _help_entries(["cls", "eval"], capsys, monkeypatch)
    for name in cls.COLUMNS:
        assert entries[OPTION_STRINGS[name]].endswith(FROM_MODEL.strip()), name
    assert not entries["--format"].endswith(FROM_MODEL.strip())  # the file name decides first
