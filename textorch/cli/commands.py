"""The command groups of ``textorch``: each one's name, the module that registers it, its help line.

Why a table: building every group's parser imports every command's module (training, the
server, classification, the demo...), and ``textorch seq tag`` needs only its own. The entry
point (:mod:`textorch.cli.main`) imports the module of the group named on the command line and
gives every other group a parser holding only its help line, so ``textorch --help`` still lists
them all. A module's ``register`` takes its help lines from here: one text for both.
"""

from __future__ import annotations

GROUPS: dict[str, tuple[str, str]] = {
    "demo": ("textorch.cli.demo", "train and use a date tagger on generated data (no files needed)"),
    "seq": ("textorch.cli.seq", "sequence labelling: train, evaluate, tag"),
    "cls": ("textorch.cli.cls", "text classification: train, evaluate, classify"),
    "serve": ("textorch.cli.serve", "serve models over HTTP (tag, classify; concurrent requests batched)"),
    "report": ("textorch.cli.report_command", "print the training history and final scores of a model directory"),
    "grobid-bridge": ("textorch.cli.apps", "write the directory GROBID's grobid.yaml names as delft.install"),
    "grobid": ("textorch.cli.apps", "train, evaluate and use GROBID models with DeLFT's per-model settings"),
    "ner": ("textorch.cli.apps", "train and evaluate NER on CoNLL-2003 as DeLFT's nerTagger does"),
    "export": ("textorch.cli.export", "export a saved model for other runtimes"),
    "import-delft": ("textorch.cli.delft_import",
                     "convert a DeLFT model directory (1.x safetensors or pickled weights) to textorch's"),
}
"""Group name -> (module with its ``register(groups)``, help line), in ``--help`` order. A module
registering several groups has them next to each other."""


def group_help(name: str) -> str:
    """The help line of group ``name``, as ``textorch --help`` lists it."""
    return GROUPS[name][1]


def named_group(argv: list[str]) -> str | None:
    """The group an argument list names: its first argument that is not an option (the
    entry point's own options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)
