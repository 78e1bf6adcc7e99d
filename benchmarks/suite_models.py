"""Where the fast-path A/B finds the saved models it times, and their test files.

It times the peer comparison's own seed-1 BiLSTM-CRF models (CoNLL-2003, GROBID name-header and
date), kept by ``bench_vs_delft`` under the bench work dir, rather than copies at paths nothing
builds: ``python -m benchmarks prepare`` trains the missing ones there, with the suite's fixed
settings. ``TEXTORCH_BENCH_DIR`` moves the work dir, ``TEXTORCH_SHARED_DATA`` the corpora.
Standard library only: listing or checking the models loads no torch.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.peers.delft_env import REPO, bench_dir

AB_MODELS: dict[str, tuple[str, str]] = {
    "conll": ("conll2003/eng.testb", "conll"),
    "name-header": ("grobid/name-header/name-header-251225.train", "grobid"),
    "date": ("grobid/date/date-220311.train", "grobid"),
}
"""Model name (= the suite's task) -> (test file under the shared data, its format): the whole
corpus file for the GROBID models."""

CONLL_TRAIN = "conll2003/eng.train"
"""The training file of the A/B training rows, under the shared data."""


def model_dir(name: str) -> Path:
    """The suite's seed-1 BiLSTM-CRF model of task ``name``, where ``suite_training.train_all``
    keeps it (``models/textorch/<task>-BidLSTM_CRF-s1`` in the bench work dir)."""
    return bench_dir() / "models" / "textorch" / f"{name}-BidLSTM_CRF-s1"


def shared_data(relative: str) -> Path:
    """A file of the shared corpora (``../shared/data`` unless ``TEXTORCH_SHARED_DATA`` says)."""
    return Path(os.environ.get("TEXTORCH_SHARED_DATA", REPO.parent / "shared" / "data")) / relative


def ab_test_file(name: str) -> Path:
    """The file the A/B rows tag with model ``name``."""
    return shared_data(AB_MODELS[name][0])


def cache_dir() -> Path:
    """textorch's embeddings cache of the suite's runners (``Runner.cache`` in ``peers/suite_runner``)."""
    return bench_dir() / "textorch-cache"


def require_models(names: list[str]) -> None:
    """Stop with what to run when a model the benchmark needs was never built."""
    missing = [str(model_dir(n)) for n in names if not (model_dir(n) / "config.json").is_file()]
    if missing:
        raise SystemExit("no saved model at " + ", ".join(missing)
                         + f": run `python -m benchmarks prepare --models {' '.join(names)}` first")
