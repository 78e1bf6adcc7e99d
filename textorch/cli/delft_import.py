"""``textorch import-delft SRC OUT``: a model trained by DeLFT as a textorch model directory."""

from __future__ import annotations

import argparse

from textorch.cli.commands import group_help


def _import(args: argparse.Namespace) -> int:
    from textorch.tagging.delft_import.importer import convert_delft_model

    out = convert_delft_model(args.source, args.output, args.embeddings, args.input_format, args.n_features)
    print(out)
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    p = groups.add_parser(
        "import-delft", help=group_help("import-delft"),
        description="Write the textorch model directory of a DeLFT sequence-labelling model. `seq tag --model` "
                    "also takes a DeLFT directory directly, converted once into the cache.")
    p.add_argument("source", metavar="SRC", help="DeLFT model directory (config.json, preprocessor.json, weights)")
    p.add_argument("output", metavar="OUT", help="textorch model directory to write (replaced if present)")
    p.add_argument("--embeddings", default=None,
                   help="the model's word vectors: a file or a registry name (default: DeLFT's embeddings name, "
                        "looked up as every name is, docs/sequence-labelling.md)")
    p.add_argument("--input-format", choices=["conll", "grobid"], default=None,
                   help="what `seq tag` reads (default: grobid for _FEATURES models and models with GROBID "
                        "labels such as B-<date>, else conll)")
    p.add_argument("--n-features", type=int, default=None,
                   help="feature columns of the GROBID input (default: up to the last column the model uses)")
    p.set_defaults(run=_import)
