"""ONNX Runtime engine vs PyTorch on GROBID date: F1 (fp32 and dynamic int8) and tagging speed.

Trains BidLSTM_CRF with the shared word2vec vectors on 90% of date-220311.train (holdout by
seed), then evaluates the same model with the PyTorch engine, ONNX fp32 and ONNX int8.
Writes benchmarks/results/onnx-date-seed{SEED}.json and prints a table.

    .venv/bin/python -m benchmarks bench_onnx [--epochs 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.data.readers import read_labelled
from textorch.data.splits import holdout
from textorch.embeddings import open_embeddings
from textorch.tagging.labeler import SequenceLabeler
from textorch.onnx.engine import attach_onnx
from textorch.onnx.export import export_labeler

SHARED = Path(__file__).resolve().parents[3] / "shared"
RESULTS = Path(__file__).resolve().parents[1] / "results"


def _run(labeler: SequenceLabeler, test: list, batch_size: int) -> tuple[float, float, list]:
    corpus = Corpus(test, "grobid")
    started = time.perf_counter()
    predictions = labeler.predict(test, batch_size=batch_size)
    tag_s = time.perf_counter() - started
    return labeler.evaluate(corpus)["f1"], tag_s, predictions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    corpus = read_labelled(str(SHARED / "data/grobid/date/date-220311.train"))
    train, test = holdout(corpus.sequences, 0.1, args.seed)
    embeddings = open_embeddings(str(SHARED / "embeddings/w2v-conll-grobid-100d.txt"))
    train_corpus = Corpus(train, corpus.format, corpus.path, corpus.n_features)
    labeler = SequenceLabeler.build(train_corpus, ModelConfig(architecture="BidLSTM_CRF"), DataConfig(),
                                    embeddings=embeddings, seed=args.seed)
    labeler.fit(train_corpus, None, TrainConfig(max_epoch=args.epochs, batch_size=20, early_stop=False, seed=args.seed))
    rows = {}
    f1, tag_s, reference = _run(labeler, test, args.batch_size)
    n_tokens = sum(len(s) for s in test)
    rows["torch fp32"] = {"f1": f1, "tokens_per_s": n_tokens / tag_s}
    # The held-out tenth is small; label agreement with PyTorch on the whole file says more.
    everything = corpus.sequences
    reference_all = labeler.predict(everything, batch_size=args.batch_size)
    n_all = sum(len(s) for s in everything)
    with tempfile.TemporaryDirectory() as tmp:
        export_labeler(labeler, Path(tmp) / "onnx", quantize=True)
        for name, quantized in (("onnx fp32", False), ("onnx int8", True)):
            attach_onnx(labeler, tmp, Path(tmp) / "onnx", quantized=quantized, threads=1)
            f1, tag_s, predictions = _run(labeler, test, args.batch_size)
            same = sum(a == b for p, q in zip(reference, predictions) for a, b in zip(p.labels, q.labels))
            max_diff = max(abs(a - b) for p, q in zip(reference, predictions) for a, b in zip(p.scores, q.scores))
            rows[name] = {"f1": f1, "tokens_per_s": n_tokens / tag_s, "labels_equal_to_torch": same / n_tokens,
                          "max_score_diff": max_diff}
            predictions_all = labeler.predict(everything, batch_size=args.batch_size)
            rows[name]["labels_equal_to_torch_whole_file"] = sum(
                a == b for p, q in zip(reference_all, predictions_all) for a, b in zip(p.labels, q.labels)) / n_all
        sizes = {f.name: f.stat().st_size for f in (Path(tmp) / "onnx").glob("*.onnx")}
    result = {"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "threads": 1, "epochs": args.epochs,
              "seed": args.seed, "n_test_sequences": len(test), "n_test_tokens": n_tokens, "n_file_tokens": n_all, "model_bytes": sizes,
              "engines": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"onnx-date-seed{args.seed}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'engine':<12}{'F1':>8}{'tokens/s':>12}{'labels = torch':>16}{'whole file':>12}{'max |score diff|':>18}")
    for name, row in rows.items():
        print(f"{name:<12}{row['f1']:>8.4f}{row['tokens_per_s']:>12.0f}"
              f"{row.get('labels_equal_to_torch', 1.0):>16.4f}{row.get('labels_equal_to_torch_whole_file', 1.0):>12.4f}"
              f"{row.get('max_score_diff', 0.0):>18.2e}")
    print("model sizes:", sizes)


if __name__ == "__main__":
    main()
