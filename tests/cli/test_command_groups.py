"""The entry point builds only the command group it is asked for, and still lists them all."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from textorch.cli.commands import GROUPS, named_group
from textorch.cli.main import main


def test_help_lists_every_group(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name, (_, help_line) in GROUPS.items():
        assert name in out
        assert help_line.split()[0] in out


@pytest.mark.parametrize("group", list(GROUPS))
def test_every_group_has_its_full_help(group: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([group, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: textorch {group} ")
    assert "--" in out.split("\n", 1)[1] or "{" in out  # its own options or sub-commands, not a stub's


def test_group_modules_register_what_the_table_says() -> None:
    import argparse
    import importlib

    for module in {module for module, _ in GROUPS.values()}:
        groups = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(groups)
        registered = list(groups.choices)
        assert registered == [name for name, (owner, _) in GROUPS.items() if owner == module]
        for name, parser in groups.choices.items():
            help_lines = {action.dest: action.help for action in groups._choices_actions}
            assert help_lines[name] == GROUPS[name][1], name
            assert parser.prog.endswith(name)


def test_named_group_skips_the_entry_points_options() -> None:
    assert named_group(["-v", "--tune-allocator", "seq", "tag", "--model", "m"]) == "seq"
    assert named_group(["--help"]) is None
    assert named_group([]) is None


def _modules_after(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter holds once the entry point built its parser for ``argv``."""
    code = ("import json, sys\nfrom textorch.cli.main import _build_parser\n"
            f"_build_parser({argv!r})\nprint(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_tagging_imports_no_other_command() -> None:
    modules = _modules_after(["seq", "tag", "--model", "m", "--input", "f"])
    assert "textorch.cli.seq" in modules
    for absent in ("textorch.cli.demo", "textorch.cli.cls", "textorch.cli.serve", "textorch.cli.apps",
                   "textorch.classification", "textorch.serve", "textorch.data.demo_corpus"):
        assert absent not in modules, absent


def test_top_level_help_imports_no_torch() -> None:
    modules = _modules_after(["--help"])
    assert "torch" not in modules
    assert not any(name.startswith("textorch.tagging") for name in modules)
