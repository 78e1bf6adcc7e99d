"""Build what the fast-path A/B loads: the suite's seed-1 BiLSTM-CRF models.

``fast_path_ab`` times saved models (``suite_models``); this trains the missing ones exactly as
the peer comparison does (``suite_training.train_all``, textorch alone: the same split files,
fixed epochs and training rules, one fresh runner process each) and keeps them where
``bench_vs_delft`` would, so either can reuse the other's. They also serve as ready models for
``stages`` and ``tagging_outputs``.

    python -m benchmarks prepare [--models conll name-header date] [--threads 1] [--force]

Needs ../shared (corpora and word vectors). CoNLL-2003 trains 3 epochs, the GROBID models 10.
"""

from __future__ import annotations

import argparse
import shutil

from benchmarks.peers import bench_data, delft_env
from benchmarks.peers.bench_vs_delft import FULL
from benchmarks.peers.suite_runner import Runner
from benchmarks.peers.suite_training import train_all
from benchmarks.suite_models import AB_MODELS, model_dir

SEED = 1


def jobs_for(names: list[str], force: bool = False) -> list[dict]:
    """The ``train_all`` jobs of the models not built yet (all of them with ``force``): the
    jobs ``bench_vs_delft`` runs for those tasks at its fixed epochs, seed 1."""
    return [{"key": f"{name}-BidLSTM_CRF", "task": name, "architecture": "BidLSTM_CRF",
             "epochs": FULL["epochs"][name], "setting": "fixed epochs", "seeds": [SEED]}
            for name in names if force or not (model_dir(name) / "config.json").is_file()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="*", default=list(AB_MODELS), choices=list(AB_MODELS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="train again the models already built")
    args = parser.parse_args()
    jobs = jobs_for(args.models, args.force)
    for name in args.models:
        if name not in {job["task"] for job in jobs}:
            print(f"{name}: built, {model_dir(name)}")
    if not jobs:
        return
    work = delft_env.bench_dir()
    vectors = delft_env.shared_embeddings()
    if not vectors.is_file():
        raise SystemExit(f"{vectors} not found: pass the vectors' folder with TEXTORCH_SHARED_EMBEDDINGS")
    for job in jobs:
        shutil.rmtree(model_dir(job["task"]), ignore_errors=True)  # a half-written or --force'd one
    r = Runner(work, None, args.threads)
    files = bench_data.prepare(work, sorted(job["task"] for job in jobs), [SEED])
    r.runner("textorch", "warm", ["warm", "--embeddings", str(vectors)])
    train_all(r, jobs, files, [SEED], vectors, systems=("textorch",))
    for job in jobs:
        state = "built" if (model_dir(job["task"]) / "config.json").is_file() else "FAILED"
        print(f"{job['task']}: {state}, {model_dir(job['task'])}")
    if r.failures:
        raise SystemExit("failed: " + "; ".join(r.failures))


if __name__ == "__main__":
    main()
