"""Check the import of DeLFT's TensorFlow-line models against Keras itself, on random inputs.

Two steps, in two environments (TensorFlow is never a textorch dependency):

1. ``keras`` (in a venv with ``tensorflow-cpu==2.15.*``, ``tensorflow-addons`` and ``h5py``):
   builds DeLFT 0.3's network for the model directory's architecture with Keras layers (the
   same layers, masks and TensorFlow Addons CRF as DeLFT's TensorFlow line), loads
   ``model_weights.hdf5`` into it, and labels random sequences: random tokens from the
   model's characters, random word vectors written to a vectors file, random feature values
   (some unseen). Writes the tokens, features, vectors and Keras' labels to ``--work``.
2. ``textorch`` (in textorch's venv, with h5py): imports the directory with
   :func:`textorch.tagging.delft_import.importer.convert_delft_model` and the same vectors, tags the
   same tokens, and prints the label agreement (and exits 1 below 100 %).

Usage:
    TF/bin/python -m benchmarks verify_keras_import keras --model DIR --work W
    python -m benchmarks verify_keras_import textorch --model DIR --work W
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np


def _layer_weights(path: Path) -> dict[str, np.ndarray]:
    import h5py

    found: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as file:
        file.visititems(lambda n, o: found.__setitem__(n, np.asarray(o)) if isinstance(o, h5py.Dataset) else None)
    return found


def _random_inputs(preprocessor: dict, config: dict, n: int, seed: int) -> tuple[list, list, dict]:
    rng = random.Random(seed)
    chars = [c for c in preprocessor["vocab_char"] if c not in ("<PAD>", "<UNK>")] + ["\u00df", "\u4e2d"]
    words = ["".join(rng.choice(chars) for _ in range(rng.randint(1, 12))) for _ in range(60)] + ["x" * 45]
    dim = int(config["word_embedding_size"])
    vectors = {w: [round(rng.uniform(-1, 1), 4) for _ in range(dim)] for w in words if rng.random() < 0.8 and " " not in w}
    features = (preprocessor.get("feature_preprocessor") or {}).get("features_map_to_index") or {}
    width = max((int(c) for c in features), default=-1) + 1
    tokens, rows = [], []
    for _ in range(n):
        sequence = [rng.choice(words) for _ in range(rng.randint(1, 25))]
        tokens.append(sequence)
        rows.append([[rng.choice(list(features.get(str(c), {"-": 0})) + ["UNSEEN"]) for c in range(width)]
                     for _ in sequence])
    return tokens, rows, vectors


def keras_side(args: argparse.Namespace) -> None:
    import tensorflow as tf
    import tensorflow_addons as tfa
    from tensorflow.keras import layers

    model_dir, work = Path(args.model), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    config = json.loads((model_dir / "config.json").read_text())
    preprocessor = json.loads((model_dir / "preprocessor.json").read_text())
    tokens, rows, vectors = _random_inputs(preprocessor, config, args.sequences, args.seed)
    weights = _layer_weights(model_dir / "model_weights.hdf5")
    feature_map = (preprocessor.get("feature_preprocessor") or {}).get("features_map_to_index") or {}
    columns = sorted(int(c) for c in feature_map)
    ntags, max_chars = len(preprocessor["vocab_tag"]), int(preprocessor["max_char_length"])

    word_in = layers.Input((None, int(config["word_embedding_size"])))
    char_in = layers.Input((None, max_chars), dtype="int32")
    char_emb = layers.TimeDistributed(layers.Embedding(len(preprocessor["vocab_char"]), config["char_embedding_size"],
                                                       mask_zero=True))
    char_lstm = layers.TimeDistributed(layers.Bidirectional(layers.LSTM(config["num_char_lstm_units"])))
    parts, inputs = [word_in, char_lstm(char_emb(char_in))], [word_in, char_in]
    if columns:
        feat_in = layers.Input((None, len(columns)), dtype="float32")
        feat_emb = layers.TimeDistributed(layers.Embedding(config["features_vocabulary_size"] * len(columns) + 1,
                                                           config["features_embedding_size"]))
        feat_lstm = layers.TimeDistributed(layers.Bidirectional(layers.LSTM(config["features_lstm_units"])))
        parts.append(feat_lstm(feat_emb(feat_in)))
        inputs.append(feat_in)
    word_lstm = layers.Bidirectional(layers.LSTM(config["num_word_lstm_units"], return_sequences=True))
    dense = layers.Dense(config["num_word_lstm_units"], activation="tanh")
    crf = tfa.layers.CRF(ntags)
    decoded = crf(dense(word_lstm(layers.Concatenate()(parts))))[0]
    model = tf.keras.Model(inputs, decoded)

    def pick(*fragments: str) -> list[np.ndarray]:
        names = sorted(n for n in weights if all(f in n for f in fragments))
        return [weights[n] for n in names]

    def lstm(group: str) -> list[np.ndarray]:
        out = []
        for side in ("forward_", "backward_"):
            cell = {n.rsplit("/", 1)[-1].split(":")[0]: weights[n] for n in weights if group in n and f"/{side}" in n}
            out += [cell["kernel"], cell["recurrent_kernel"], cell["bias"]]
        return out

    groups = sorted({n.split("/")[1] for n in weights if n.startswith("model/")})
    word_group = next(g for g in groups if g.startswith("bidirectional"))
    char_group = next(g for g in groups if g.startswith("time_distributed") and any(
        n.startswith(f"model/{g}/forward_") for n in weights))
    char_emb.set_weights(pick("model/time_distributed/", "embeddings"))
    char_lstm.set_weights(lstm(f"model/{char_group}/"))
    if columns:
        feat_emb.set_weights(pick("features_embedding_td/", "embeddings"))
        feat_lstm.set_weights(lstm("features_embedding_td_2/"))
    word_lstm.set_weights(lstm(f"model/{word_group}/"))
    dense.set_weights([weights["model/dense/kernel:0"], weights["model/dense/bias:0"]])
    crf_dense = {n.rsplit("/", 1)[-1].split(":")[0]: weights[n] for n in weights if n.startswith("crf/crf/")}
    by_name = {"kernel": crf_dense["kernel"], "bias": crf_dense["bias"], "chain_kernel": weights["crf/chain_kernel:0"],
               "left_boundary": weights["crf/left_boundary:0"], "right_boundary": weights["crf/right_boundary:0"]}
    crf.set_weights([by_name[w.name.split("/")[-1].split(":")[0]] for w in crf.weights])

    import re

    def normalized(word: str) -> str:
        return re.sub(r"[0-9\uff10-\uff19]", "0", word)

    labels = []
    index_tag = {int(i): t for t, i in preprocessor["vocab_tag"].items()}
    for start in range(0, len(tokens), 16):  # batches of sequences of mixed lengths: padding and masks at work
        batch, batch_rows = tokens[start:start + 16], rows[start:start + 16]
        length = max(len(s) for s in batch)
        words = np.zeros((len(batch), length, int(config["word_embedding_size"])), dtype="float32")
        chars = np.zeros((len(batch), length, max_chars), dtype="int32")
        feats = np.zeros((len(batch), length, len(columns)), dtype="float32")
        for b, sequence in enumerate(batch):
            for t, token in enumerate(sequence):
                words[b, t] = vectors.get(normalized(token), 0.0)
                ids = [preprocessor["vocab_char"].get(c, 1) for c in token[:max_chars]]
                chars[b, t, : len(ids)] = ids
                for k, column in enumerate(columns):
                    feats[b, t, k] = feature_map[str(column)].get(batch_rows[b][t][column], 0)
        decoded = model.predict([words, chars, feats][: len(inputs)], verbose=0)
        labels += [[index_tag[int(i)] for i in decoded[b, : len(s)]] for b, s in enumerate(batch)]
    (work / "vectors.txt").write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items()))
    (work / "keras.json").write_text(json.dumps({"tokens": tokens, "features": rows, "labels": labels,
                                                 "tensorflow": tf.__version__, "addons": tfa.__version__}))


def textorch_side(args: argparse.Namespace) -> None:
    from textorch.data.corpus import TokenSequence
    from textorch.tagging.delft_import.importer import convert_delft_model
    from textorch.tagging.labeler import SequenceLabeler

    work = Path(args.work)
    expected = json.loads((work / "keras.json").read_text())
    out = convert_delft_model(args.model, work / "imported", str(work / "vectors.txt"))
    labeler = SequenceLabeler.load(out, engine="torch")
    sequences = [TokenSequence(t, None, features=f if labeler.n_features else None)
                 for t, f in zip(expected["tokens"], expected["features"])]
    predicted = [p.labels for p in labeler.predict(sequences, with_scores=False)]
    tokens = sum(len(s) for s in expected["labels"])
    agree = sum(a == b for p, e in zip(predicted, expected["labels"]) for a, b in zip(p, e))
    counts: dict[str, int] = {}
    for sequence in expected["labels"]:
        for label in sequence:
            counts[label] = counts.get(label, 0) + 1
    print(json.dumps({"model": Path(args.model).name, "tensorflow": expected["tensorflow"],
                      "addons": expected["addons"], "sequences": len(sequences), "tokens": tokens,
                      "agreeing_tokens": agree, "keras_label_counts": counts}))
    if agree != tokens:
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("side", choices=["keras", "textorch"])
    parser.add_argument("--model", required=True, help="DeLFT TensorFlow-line model directory")
    parser.add_argument("--work", required=True, help="folder for the inputs and Keras' labels")
    parser.add_argument("--sequences", type=int, default=200)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    (keras_side if args.side == "keras" else textorch_side)(args)


if __name__ == "__main__":
    main()
