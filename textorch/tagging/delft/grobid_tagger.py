"""DeLFT's ``grobidTagger.py`` command line, spelled as ``textorch grobid`` arguments.

GROBID trains a model by running ``python3 delft/applications/grobidTagger.py MODEL train
--input FILE --output <grobid-home>/models [...]`` in its ``delft.install`` directory. The bridge
written by ``textorch grobid-bridge`` holds that script; it hands its arguments to
:func:`textorch_arguments` and runs the result as ``textorch``. DeLFT's meanings are kept:
``--output D`` is a models directory (the model goes to ``D/MODEL-ARCHITECTURE``), without it the
model lives in ``data/models/sequenceLabelling/grobid-MODEL-ARCHITECTURE``, ``-1`` means "the
model's default", and ``--input-model D`` (incremental training) may name the models directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from textorch.errors import ConfigError
from textorch.tagging.delft.embeddings import REGISTRY_FILE, resolve_embeddings_name
from textorch.tagging.presets import GROBID_DEFAULT_ARCHITECTURE

ACTIONS = {"train": "train", "train_eval": "train-eval", "eval": "eval", "tag": "tag"}
DEFAULT_ARCHITECTURE = GROBID_DEFAULT_ARCHITECTURE
"""GROBID passes the architecture its grobid.yaml names; without one, textorch's GROBID default."""
_NUMBERS = {"max_sequence_length": "--max-sequence-length", "batch_size": "--batch-size", "patience": "--patience",
            "max_epoch": "--max-epoch", "fold_count": "--fold-count", "seed": "--seed",
            "features_vocabulary_size": "--feature-vocabulary-size", "learning_rate": "--learning-rate"}
"""DeLFT options passed on when given (DeLFT's "not given" is -1 or None)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grobidTagger.py", description="DeLFT's grobidTagger, run by textorch")
    parser.add_argument("model")
    parser.add_argument("action", choices=list(ACTIONS))
    parser.add_argument("--fold-count", type=int, default=1)
    parser.add_argument("--architecture", default=DEFAULT_ARCHITECTURE)
    parser.add_argument("--output")
    parser.add_argument("--embedding")
    parser.add_argument("--transformer")
    parser.add_argument("--input")
    parser.add_argument("--incremental", action="store_true")
    parser.add_argument("--input-model")
    parser.add_argument("--max-sequence-length", type=int, default=-1)
    parser.add_argument("--batch-size", type=int, default=-1)
    parser.add_argument("--patience", type=int, default=-1)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--max-epoch", type=int, default=-1)
    parser.add_argument("--early-stop", default=None, metavar="true|false")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--features-indices", default=None, metavar="COLUMNS")
    parser.add_argument("--features-vocabulary-size", type=int, default=None)
    parser.add_argument("--num-workers", type=int, default=1)  # how DeLFT loads data: no textorch counterpart
    parser.add_argument("--use-ELMo", action="store_true")
    parser.add_argument("--multi-gpu", action="store_true")
    parser.add_argument("--wandb", action="store_true")
    return parser


def model_directory(models: str | None, model: str, architecture: str) -> str:
    """DeLFT's place of a GROBID model: ``models/MODEL-ARCH`` under ``--output``, else its default folder."""
    if models:
        return str(Path(models) / f"{model}-{architecture}")
    return str(Path("data/models/sequenceLabelling") / f"grobid-{model}-{architecture}")


def textorch_arguments(argv: list[str], bridge_dir: str | Path | None = None) -> list[str]:
    """The ``textorch`` command line for a DeLFT grobidTagger command line.

    ``bridge_dir`` holds ``delft/resources-registry.json`` when embedding names are to be looked
    up in DeLFT's registry first.
    """
    args = _parser().parse_args(argv)
    for flag, given in (("--use-ELMo", args.use_ELMo), ("--wandb", args.wandb)):
        if given:
            raise ConfigError(f"grobidTagger.py {flag}: not available in textorch")
    if args.multi_gpu:
        raise ConfigError("grobidTagger.py --multi-gpu: use 'textorch grobid MODEL train --devices N' instead")
    output = model_directory(args.output, args.model, args.architecture)
    out = ["grobid", args.model, ACTIONS[args.action], "--architecture", args.architecture, "--output", output]
    if args.input:
        out += ["--input", args.input]
    elif args.action == "tag":
        raise ConfigError("grobidTagger.py tag: give --input, a file of GROBID feature lines to tag")
    for name, flag in _NUMBERS.items():
        value = getattr(args, name)
        if value is not None and value != -1 and not (name == "fold_count" and value == 1):
            out += [flag, str(value)]
    if args.early_stop is not None:
        out += ["--early-stop", args.early_stop]
    if args.features_indices:
        out += ["--feature-columns", args.features_indices]
    if args.transformer:
        out += ["--transformer", args.transformer]
    if args.embedding:
        registry = Path(bridge_dir) / "delft" / REGISTRY_FILE if bridge_dir is not None else None
        out += ["--embeddings", resolve_embeddings_name(args.embedding, registry if registry and registry.is_file() else None)]
    if args.incremental:
        out += ["--incremental", "--input-model", _input_model(args.input_model, args.model, args.architecture, output)]
    return out


def _input_model(given: str | None, model: str, architecture: str, output: str) -> str:
    """The model to continue: ``--input-model``'s ``MODEL-ARCH`` folder, the folder itself, or ``--output``'s."""
    if not given:
        return output
    inside = Path(given) / f"{model}-{architecture}"
    return str(inside) if inside.is_dir() else given
