"""``textorch report DIR``: the training history and final scores kept in a model directory."""

from __future__ import annotations

import argparse
import json

from textorch.cli.commands import group_help
from textorch.model_dir import read_model_config
from textorch.train.history import read_history


def _report(args: argparse.Namespace) -> int:
    from textorch.eval.training_report import format_history

    history = read_history(args.model)
    if args.json:
        print(json.dumps(history.to_json(), indent=2, ensure_ascii=False))
        return 0
    config = read_model_config(args.model)
    header = {
        "model": str(args.model),
        "task": str(config.get("task", history.task)).replace("_", " "),
        "architecture": str(config.get("model", {}).get("architecture", "?")),
        "runs": str(len(history.runs)),
    }
    print(format_history(history, header), end="")
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    p = groups.add_parser("report", help=group_help("report"))
    p.add_argument("model", metavar="DIR", help="model directory (written by a train command)")
    p.add_argument("--json", action="store_true", help="print history.json as it is instead of tables")
    p.set_defaults(run=_report)
