"""In-process A/B of what tagging keeps across calls.

    .venv/bin/python -m benchmarks kept_values_ab [--train FILE] [--test FILE] [--vectors FILE]
        [--sentences 300] [--rounds 12]

Trains a default CoNLL-2003 tagger for one epoch on the first 600 sentences of ``--train`` (the
weights only need to be a real model's shape), then times, in one process with the variants
alternating: one-sequence calls over ``--sentences`` test sentences (tokens seen before) and one
call over them at batch 32, with everything kept (the default), without LSTM weights laid out
for oneDNN, and without the token-vector cache; and what one content check of the kept values costs
(``WeightSnapshot.matches``). Prints medians and minima in milliseconds (docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import torch

from textorch.data.readers import read_conll  # noqa: E402
from textorch.models import onednn_lstm  # noqa: E402
from textorch.models.weight_state import WeightSnapshot  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared"


def _first_sentences(path: str, count: int, target: Path) -> Path:
    lines, seen = [], 0
    with open(path, encoding="utf-8") as source:
        for line in source:
            lines.append(line)
            if not line.strip():
                seen += 1
                if seen >= count:
                    break
    target.write_text("".join(lines), encoding="utf-8")
    return target


def _alternated(variants: dict[str, Callable[[], contextlib.AbstractContextManager]], work: Callable[[], object],
                rounds: int) -> dict[str, list[float]]:
    """Milliseconds of ``work()`` under each variant's context, the order reversed every round."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds):
        order = list(variants.items())
        for name, context in order if round_ % 2 else reversed(order):
            with context():
                work()  # tokens seen before, weights laid out
                started = time.perf_counter()
                work()
                times[name].append((time.perf_counter() - started) * 1000)
    return times


def _report(title: str, times: dict[str, list[float]]) -> None:
    base = statistics.median(next(iter(times.values())))
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{title}: {name}: median {median:.1f} ms (min {min(values):.1f}), first/this {base / median:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default=str(SHARED / "data/conll2003/eng.train"))
    parser.add_argument("--test", default=str(SHARED / "data/conll2003/eng.testb"))
    parser.add_argument("--vectors", default=str(SHARED / "embeddings/w2v-conll-grobid-100d.txt"))
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        train = _first_sentences(args.train, 600, Path(scratch) / "train.conll")
        labeler = SequenceLabeler.train(str(train), embeddings=args.vectors, cache_dir=str(Path(scratch) / "cache"),
                                        max_epoch=1, seed=1)
    test = read_conll(args.test).sequences[: args.sentences]
    cache = labeler.token_vector_cache
    available = onednn_lstm.laid_out_lstm_available

    @contextlib.contextmanager
    def without(laid_out: bool = True, kept_vectors: bool = True):
        if not laid_out:
            onednn_lstm.laid_out_lstm_available = lambda dtype=torch.float32: False
        labeler.token_vector_cache = cache if kept_vectors else None
        try:
            yield
        finally:
            onednn_lstm.laid_out_lstm_available = available
            labeler.token_vector_cache = cache

    variants = {"kept (default)": without, "no laid-out LSTM weights": lambda: without(laid_out=False),
                "no token-vector cache": lambda: without(kept_vectors=False)}
    _report("one-sequence calls", _alternated(variants, lambda: [labeler.predict([s]) for s in test], args.rounds))
    _report("one call, batch 32", _alternated(variants, lambda: labeler.predict(test, batch_size=32), args.rounds))
    rnn = labeler.model.encoder.rnn
    for name, params in (("word LSTM direction", onednn_lstm._sources(rnn, 0, "")),
                         ("character encoder", tuple(labeler._char_encoder().parameters()))):
        snapshot = WeightSnapshot(params)
        best = min(timeit.repeat(lambda: snapshot.matches(params), number=2000, repeat=5)) / 2000 * 1e6
        print(f"WeightSnapshot.matches, {name} ({sum(p.numel() for p in params)} values): {best:.1f} us")


if __name__ == "__main__":
    main()
