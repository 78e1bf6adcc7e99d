"""Where does textorch's time go? cProfile and torch.profiler on CoNLL-2003 tagging and training.

    .venv/bin/python -m benchmarks profile_seq tag      # predict eng.testb, batch 32 and one-sequence calls
    .venv/bin/python -m benchmarks profile_seq train    # one epoch on the first N sentences of eng.train

Prints the top functions by cumulative and by own time (cProfile), then the top operators by
self CPU time (torch.profiler), and writes the raw cProfile dump to
benchmarks/work/profile-MODE.pstats (git-ignored; open with ``python -m pstats``). The network is untrained: the work per token is the same.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from benchmarks.common import REPO, shared  # noqa: E402

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.runtime.malloc_tuning import keep_freed_memory  # noqa: E402


def build(train_file: str, limit: int, cache_dir: str | None):
    corpus = read_labelled(str(shared("data", train_file)), None)
    corpus.sequences = corpus.sequences[:limit]
    vectors = str(shared("embeddings", "w2v-conll-grobid-100d.txt"))
    embeddings = open_embeddings(vectors, cache_dir=cache_dir)
    labeler = SequenceLabeler.build(corpus, ModelConfig(), DataConfig(embeddings=vectors), embeddings, "cpu", seed=1)
    return labeler, corpus


def work_tag(labeler: SequenceLabeler, corpus, stream: int) -> None:
    labeler.predict(corpus.sequences, batch_size=32)
    for sequence in corpus.sequences[:stream]:
        labeler.predict([sequence], batch_size=1)


def work_train(labeler: SequenceLabeler, corpus) -> None:
    labeler.fit(corpus, None, TrainConfig(max_epoch=1, batch_size=32, early_stop=False, seed=1))


def report(profiler: cProfile.Profile, top: int, mode: str) -> None:
    work = REPO / "benchmarks" / "work"
    work.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(work / f"profile-{mode}.pstats"))
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(key).print_stats(top)
        text = out.getvalue()
        print(f"===== cProfile, sorted by {key} =====")
        print(text[text.find("   ncalls"):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["tag", "train"])
    parser.add_argument("--limit", type=int, default=3000, help="sentences used (train: of eng.train)")
    parser.add_argument("--stream", type=int, default=300, help="one-sequence calls when tagging")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    keep_freed_memory()  # as textorch's command line: freed memory is not faulted in again, as operator time
    if args.threads:
        torch.set_num_threads(args.threads)
    source = "conll2003/eng.testb" if args.mode == "tag" else "conll2003/eng.train"
    labeler, corpus = build(source, args.limit, args.cache_dir)
    work = (lambda: work_tag(labeler, corpus, args.stream)) if args.mode == "tag" else (lambda: work_train(labeler, corpus))
    if args.mode == "tag":
        work_tag(labeler, corpus, 20)  # warm-up
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.runcall(work)
    print(f"{args.mode}: {time.perf_counter() - started:.2f} s under cProfile, {torch.get_num_threads()} threads")
    report(profiler, args.top, args.mode)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        work()
    print("===== torch.profiler, top operators by self CPU time =====")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
