"""Training on the shared GROBID date corpus (skipped where ../shared is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import require_shared
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.training import train_tagger

pytestmark = pytest.mark.real_data


def test_grobid_date_train_eval_with_shared_embeddings(tmp_path: Path) -> None:
    train = require_shared("grobid/date/date-220311.train")
    vectors = require_shared("w2v-conll-grobid-100d.txt", kind="embeddings")
    outcome = train_tagger(
        str(train), str(tmp_path / "model"), ModelConfig(),
        TrainConfig(seed=1, max_epoch=25), DataConfig(embeddings=str(vectors)),
        hold_out_test=True, cache_dir=str(tmp_path / "cache"),
    )
    assert outcome.splits == {"train": 516, "valid": 57, "test": 64}
    scores = outcome.test_scores
    assert scores["n_sequences"] == 64
    assert scores["f1"] >= 0.93, scores
    assert set(scores["per_label"]) == {"<day>", "<month>", "<year>"}
    size = sum(p.stat().st_size for p in (tmp_path / "model").iterdir())
    assert size < 5 * 1024 * 1024  # the embedding matrix is not in the model
