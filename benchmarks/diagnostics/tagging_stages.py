"""The Python stages around the network when a file is tagged: parsing, encoding, batching, writing.

    .venv/bin/python -m benchmarks tagging_stages --model DIR --input FILE [--input-format grobid]
        [--batch-size 32] [--repeats 3]

In one process, with the cyclic collector paused and one thread (as ``seq tag --pause-collector
--threads 1``), each stage timed over the whole file the way the streamed command runs it:
reading the file into sequences (``stream_for_tagging``), cutting chunks, ``encode`` per chunk,
``collate`` of the chunk's length-sorted batches (with the character vectors of the chunk's token
types, computed outside the clock), and writing each sequence back in the input's style
(``grobid_block`` / ``conll_block``) with labels drawn from the model's (the writer's cost does
not depend on which). The network is not run. Each stage's time is the best of ``--repeats``
passes. Why: the whole-process rate of issue 41 counts these stages as well as the network, and
a fresh-process timing on a shared machine is too noisy to see a stage change by itself.
Writes ``results/tagging-stages-<model dir name>.json``.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import machine, print_table, write_json
from textorch.data.batching import sorted_batches
from textorch.data.streams import chunks
from textorch.data.writers import conll_block, grobid_block
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.tag_files import ChunkSize, stream_for_tagging

STAGES = ("parse", "chunks", "encode", "collate", "write")


def one_pass(labeler: SequenceLabeler, path: str, input_format: str, batch_size: int) -> tuple[dict[str, float], int]:
    """Seconds of each stage over the whole file, one pass; and the file's tokens."""
    times = dict.fromkeys(STAGES, 0.0)
    started = time.perf_counter()
    sequences = list(stream_for_tagging(path, input_format, labeler))
    times["parse"] = time.perf_counter() - started
    started = time.perf_counter()
    size = ChunkSize()
    parts = list(chunks(iter(sequences), size.sequences, size.tokens))
    times["chunks"] = time.perf_counter() - started
    block = grobid_block if input_format == "grobid" else conll_block
    labels = labeler.encoder.labels.items
    rng = np.random.default_rng(0)
    for part in parts:
        started = time.perf_counter()
        data = labeler.encode(part)
        times["encode"] += time.perf_counter() - started
        vectors = data.token_vectors(labeler._char_encoder(), "cpu", None)
        started = time.perf_counter()
        for batch in sorted_batches(data.lengths(), batch_size):
            data.batch(batch, vectors)
        times["collate"] += time.perf_counter() - started
        tags = [[labels[k] for k in rng.integers(0, len(labels), len(s))] for s in part]
        started = time.perf_counter()
        "".join([block(s, t) for s, t in zip(part, tags)])
        times["write"] += time.perf_counter() - started
    return times, sum(map(len, sequences))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a saved sequence-labelling model directory")
    parser.add_argument("--input", required=True, help="the file to read, as `seq tag --input`")
    parser.add_argument("--input-format", default="grobid", choices=("grobid", "conll"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    torch.set_num_threads(1)
    labeler = SequenceLabeler.load(args.model)
    gc.disable()  # what --pause-collector does for the command
    try:
        results = [one_pass(labeler, args.input, args.input_format, args.batch_size) for _ in range(args.repeats)]
    finally:
        gc.enable()
    passes = [times for times, _ in results]
    best = {stage: min(p[stage] for p in passes) for stage in STAGES}
    n_tokens = results[0][1]
    row = {"input": Path(args.input).name, "tokens": n_tokens, **{k: round(v, 4) for k, v in best.items()},
           "sum": round(sum(best.values()), 4)}
    print_table([row], ["input", "tokens", *STAGES, "sum"])
    path = write_json(f"tagging-stages-{Path(args.model).name}",
                      {"machine": machine(), "args": vars(args), "best_s": best, "passes": passes, "tokens": n_tokens})
    print(f"written: {path}")


if __name__ == "__main__":
    main()
