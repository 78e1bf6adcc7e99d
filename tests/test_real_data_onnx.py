"""ONNX engine and its int8 model on a real GROBID date model (skipped where ../shared is absent).

The unit tests in ``test_onnx.py`` hold the engine to PyTorch on tiny random models; this module
checks the agreement the benchmark reports (identical labels in fp32, a small F1 change in int8)
on a model trained on real data, whose scores are far from uniform.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from conftest import require_shared  # noqa: E402
from textorch.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.labeler import SequenceLabeler  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402
from textorch.workflows import train_tagger  # noqa: E402

pytestmark = pytest.mark.real_data

TEST_EVERY = 10
"""Every tenth sequence of the corpus is test data (64 of 637), the rest trains the model."""


def _split(corpus_file: Path, directory: Path) -> tuple[Path, Path]:
    """Write train and test files cut from one GROBID training file at its blank separator lines."""
    blocks, current = [], []
    for line in corpus_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    train = [b for i, b in enumerate(blocks) if i % TEST_EVERY]
    test = [b for i, b in enumerate(blocks) if not i % TEST_EVERY]
    paths = directory / "train.txt", directory / "test.txt"
    for path, part in zip(paths, (train, test)):
        path.write_text("\n\n".join("\n".join(block) for block in part) + "\n", encoding="utf-8")
    return paths


@pytest.fixture(scope="module")
def date_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """A BidLSTM_CRF date model trained once for the module: (model dir, test file, PyTorch test scores)."""
    corpus_file = require_shared("grobid/date/date-220311.train")
    vectors = require_shared("w2v-conll-grobid-100d.txt", kind="embeddings")
    directory = tmp_path_factory.mktemp("date-onnx")
    train, test = _split(corpus_file, directory)
    outcome = train_tagger(
        str(train), str(directory / "model"), ModelConfig(), TrainConfig(seed=1, max_epoch=10, early_stop=False),
        DataConfig(embeddings=str(vectors)), test_path=str(test), cache_dir=str(directory / "cache"),
    )
    assert outcome.splits["test"] == 64
    return directory / "model", test, outcome.test_scores


def _load(model_dir: Path) -> SequenceLabeler:
    return SequenceLabeler.load(model_dir, cache_dir=str(model_dir.parent / "cache"))


def test_onnx_engine_gives_pytorch_labels_and_scores_on_a_real_model(date_model) -> None:
    model_dir, test, torch_scores = date_model
    labeler = _load(model_dir)
    sequences = read_labelled(test).sequences
    expected = labeler.predict(sequences)
    attach_onnx(labeler, model_dir, model_dir.parent / "onnx")
    got = labeler.predict(sequences)
    assert [p.labels for p in got] == [p.labels for p in expected]
    for a, b in zip(expected, got):
        np.testing.assert_allclose(b.scores, a.scores, atol=1e-4)
    assert labeler.evaluate(test)["f1"] == pytest.approx(torch_scores["f1"], abs=1e-12)


def test_int8_model_changes_f1_by_under_one_point_on_a_real_model(date_model) -> None:
    model_dir, test, torch_scores = date_model
    labeler = _load(model_dir)
    sequences = read_labelled(test).sequences
    expected = labeler.predict(sequences, with_scores=False)
    attach_onnx(labeler, model_dir, model_dir.parent / "onnx-int8", quantized=True)
    got = labeler.predict(sequences, with_scores=False)
    agreement = np.mean([a == b for x, y in zip(expected, got) for a, b in zip(x.labels, y.labels)])
    assert agreement >= 0.98, agreement
    assert torch_scores["f1"] >= 0.9  # a trained model, so that the comparison means something
    assert abs(labeler.evaluate(test)["f1"] - torch_scores["f1"]) < 0.01
