"""DeLFT's own labels for a file, run INSIDE DeLFT's venv (see delft_env.py), never textorch's.

``delft_runner.py tagfile`` tags without the feature columns, which a ``_FEATURES`` model
needs; this command passes them, as GROBID does, and writes every sequence's labels as JSON,
so that ``bench_delft_import.py`` can compare them token by token with textorch's.

Usage (in DeLFT's venv):
    python delft_parity_runner.py --model DIR --input FILE --format grobid --output labels.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

with contextlib.redirect_stdout(sys.stderr):
    from delft.sequenceLabelling.reader import (
        load_data_and_labels_conll,
        load_data_and_labels_crf_file,
    )
    from delft.sequenceLabelling.wrapper import Sequence


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--format", choices=["conll", "grobid"], required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--limit", type=int, default=0, help="first N sequences only (0: all)")
    args = parser.parse_args()
    if args.format == "conll":
        tokens, _ = load_data_and_labels_conll(args.input)
        features = None
    else:
        tokens, _, features = load_data_and_labels_crf_file(args.input)
    tokens = [list(s) for s in tokens]
    if args.limit:
        tokens = tokens[: args.limit]
        features = None if features is None else features[: args.limit]
    with contextlib.redirect_stdout(sys.stderr):
        model = Sequence(os.path.basename(args.model.rstrip("/")), nb_workers=0)
        model.load(dir_path=args.model)
        uses_features = model.model_config.architecture.endswith("FEATURES")
        tagged = model.tag(tokens, None, features=[list(f) for f in features] if uses_features else None)
    labels = [[label for _, label in sequence] for sequence in tagged]
    with open(args.output, "w", encoding="utf-8") as out:
        json.dump({"tokens": tokens, "labels": labels}, out)


if __name__ == "__main__":
    main()
