"""The streaming commands share one spelling of the chunk bounds (``--chunk-sequences``,
``--chunk-tokens``): each refuses a bound the chunk rule cannot keep by the option's name, before
any model is read (the model paths here do not exist), and only the classification commands
accept their former ``--chunk-size``."""

from __future__ import annotations

from pathlib import Path

import pytest

from textorch.cli.main import main


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    data = tmp_path / "in.txt"
    data.write_text("a text\n", encoding="utf-8")
    missing = str(tmp_path / "no-model")
    return {
        "seq tag": ["seq", "tag", "--model", missing, "--input", str(data)],
        "seq eval": ["seq", "eval", "--model", missing, "--test", str(data)],
        "grobid tag": ["grobid", "date", "tag", "--output", missing, "--input", str(data)],
        "cls classify": ["cls", "classify", "--model", missing, "--input", str(data)],
        "cls eval": ["cls", "eval", "--model", missing, "--test", str(data)],
    }


@pytest.mark.parametrize("command", ["seq tag", "seq eval", "grobid tag", "cls classify", "cls eval"])
@pytest.mark.parametrize("bad,message", [
    (["--chunk-sequences", "1"], "--chunk-sequences must be >= 2"),
    (["--chunk-tokens", "0"], "--chunk-tokens must be >= 1"),
])
def test_bad_chunk_bounds_are_refused_by_name_before_the_model_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture, command: str, bad: list[str], message: str) -> None:
    assert main([*_commands(tmp_path)[command], *bad, "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert message in error and "no-model" not in error, error


@pytest.mark.parametrize("command", ["seq tag", "grobid tag"])
def test_tagging_commands_never_had_chunk_size(tmp_path: Path, capsys: pytest.CaptureFixture, command: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([*_commands(tmp_path)[command], "--chunk-size", "3"])
    assert stopped.value.code == 2 and "--chunk-size" in capsys.readouterr().err
