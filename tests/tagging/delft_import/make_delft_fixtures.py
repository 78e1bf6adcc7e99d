"""Regenerate ``tests/fixtures/delft-1.2/``: tiny models made by DeLFT 1.2.0, kept as text.

Run INSIDE DeLFT's venv (``python -m benchmarks delft_env`` creates it), from the repository
root, with the shared GROBID date data present:

    benchmarks/work/delft-venv/bin/python tests/tagging/delft_import/make_delft_fixtures.py

For each architecture DeLFT trains a tiny network (one epoch on 60 date sequences), its
weights are then replaced by seeded random values of a larger scale (a one-epoch model labels
nearly every token alike, which would make agreement a weak check), DeLFT saves and reloads
it, and ``Sequence.tag`` labels the tagging sequences. Written per architecture: DeLFT's
``config.json``, ``preprocessor.json`` (and for BERT_CRF, whose transformer is a tiny random BERT
from ``tests/tiny_transformer.py``, its ``transformer-config.json`` and ``transformer-tokenizer/``)
as they are, and ``weights.json`` (every tensor as a
list of floats: no weight binary in git); shared: ``vectors.txt`` (6-dimensional word vectors,
some words deliberately missing or only in lower case) and ``expected.json`` (the tagging
tokens, their feature columns and DeLFT's labels per architecture).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

with contextlib.redirect_stdout(sys.stderr):
    import torch
    from delft import DELFT_PROJECT_DIR
    from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
    from delft.sequenceLabelling.wrapper import Sequence
    from delft.utilities.preprocess import normalize_num

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "fixtures" / "delft-1.2"
DATA = REPO.parent / "shared" / "data" / "grobid" / "date" / "date-220311.train"
ARCHITECTURES = ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidLSTM_CRF_CASING", "BidGRU_CRF", "BidLSTM_CNN_CRF", "BidLSTM",
                 "BERT_CRF"]
TEXT_FILES = ("config.json", "preprocessor.json", "transformer-config.json")
EMBEDDINGS = "textorch-fixture-6d"


def tagging_input(tokens, features):
    """Held-out sequences plus the edge cases of the encoding: one token, an unknown character,
    full-width digits (normalised for the lookup), a token past max_char_length."""
    x, f = [list(s) for s in tokens[60:85]], [list(s) for s in features[60:85]]
    row = list(features[0][0])
    odd = [["7"], ["Straße", "２０２０"], ["x" * 40, "June", "1999"]]
    x += odd
    f += [[row] * len(s) for s in odd]
    unseen = list(row)
    unseen[-1] = "UNSEEN_VALUE"
    f[-1][0] = unseen
    return x, f


def write_vectors(words: set[str], path: Path) -> None:
    rng = random.Random(7)
    # about a fifth of the words have no vector, "June" none of its own (see below)
    kept = [w for w in sorted(words) if rng.random() < 0.8 and w not in ("June", "june")]
    lines = [f"{w} " + " ".join(f"{rng.uniform(-1, 1):.5f}" for _ in range(6)) for w in kept if " " not in w]
    lines.append("june " + " ".join("0.5" for _ in range(6)))  # only in lower case: "June" must miss it
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def register(path: Path) -> None:
    registry_path = Path(DELFT_PROJECT_DIR) / "resources-registry.json"
    registry = json.loads(registry_path.read_text(encoding="utf-8"))
    entry = {"name": EMBEDDINGS, "path": str(path), "type": "glove", "format": "vec", "lang": "en", "item": "word"}
    registry["embeddings"] = [e for e in registry["embeddings"] if e.get("name") != EMBEDDINGS] + [entry]
    registry_path.write_text(json.dumps(registry, indent=4) + "\n", encoding="utf-8")


def randomise(model: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            # matrices scaled by their fan-in, small biases and transitions: no layer saturates,
            # and the labels depend on every layer below the output
            if "crf" in name or parameter.dim() == 1:
                scale = 0.1
            else:
                scale = 2.0 / parameter.shape[-1] ** 0.5
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)


def main() -> None:
    tokens, labels, features = load_data_and_labels_crf_file(str(DATA))
    x_train, y_train, f_train = [list(s) for s in tokens[:60]], [list(s) for s in labels[:60]], [list(s) for s in features[:60]]
    x_tag, f_tag = tagging_input(tokens, features)
    OUT.mkdir(parents=True, exist_ok=True)
    vectors = OUT / "vectors.txt"
    write_vectors({normalize_num(w) for s in x_train + x_tag for w in s}, vectors)
    register(vectors)
    expected = {"tokens": x_tag, "features": f_tag, "labels": {}}
    work = Path(tempfile.mkdtemp())
    sys.path.insert(0, str(REPO))
    from tests.tiny_transformer import write_tiny_bert

    # a tiny random BERT (WordPiece), a local directory as DeLFT's transformer_name
    bert = write_tiny_bert(work / "tiny-bert", sorted({w for s in x_train for w in s})[:40], max_positions=64)
    try:
        for seed, architecture in enumerate(ARCHITECTURES):
            transformer = architecture.startswith("BERT")
            with contextlib.redirect_stdout(sys.stderr):
                model = Sequence(f"fixture-{architecture}", architecture=architecture,
                                 embeddings_name=None if transformer else EMBEDDINGS,
                                 transformer_name=str(bert) if transformer else None,
                                 char_emb_size=4, char_lstm_units=3, word_lstm_units=5, max_epoch=1, batch_size=8,
                                 early_stop=False, nb_workers=0, max_sequence_length=50)
                model.train(x_train, y_train, f_train=f_train)
                randomise(model.model, seed)
                model.save(str(work))
                reloaded = Sequence(f"fixture-{architecture}", nb_workers=0)
                reloaded.load(dir_path=str(work / f"fixture-{architecture}"))
                uses_features = architecture.endswith("FEATURES")
                tagged = reloaded.tag(x_tag, None, features=f_tag if uses_features else None)
            expected["labels"][architecture] = [[label for _, label in s] for s in tagged]
            source = work / f"fixture-{architecture}"
            target = OUT / architecture
            target.mkdir(exist_ok=True)
            for name in TEXT_FILES:
                if (source / name).is_file():
                    shutil.copy(source / name, target / name)
            if (source / "transformer-tokenizer").is_dir():
                shutil.copytree(source / "transformer-tokenizer", target / "transformer-tokenizer", dirs_exist_ok=True)
            from safetensors.torch import load_file

            state = load_file(str(source / "model.safetensors"))
            weights = {name: {"shape": list(t.shape), "values": [float(v) for v in t.reshape(-1).tolist()]}
                       for name, t in state.items()}
            (target / "weights.json").write_text(json.dumps(weights) + "\n", encoding="utf-8")
            print(architecture, "done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (OUT / "expected.json").write_text(json.dumps(expected, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
