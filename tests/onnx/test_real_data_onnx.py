"""ONNX engine and its int8 model on a real GROBID date model (skipped where ../shared is absent).

The unit tests in ``test_onnx.py`` hold the engine to PyTorch on tiny random models; this module
checks the agreement the benchmark reports (identical labels in fp32, a small F1 change in int8)
on a model trained on real data, whose scores are far from uniform.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from conftest import require_shared  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.data.corpus import Corpus  # noqa: E402
from textorch.data.readers import read_labelled  # noqa: E402
from textorch.embeddings import open_embeddings  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402
from textorch.onnx.engine import attach_onnx  # noqa: E402

pytestmark = pytest.mark.real_data

TEST_EVERY = 10
"""Every tenth sequence of the corpus is test data (64 of 637), the rest trains the model."""


@pytest.fixture(scope="module")
def date_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Corpus, dict]:
    """A BidLSTM_CRF date model trained once for the module: (model dir, test corpus, PyTorch test scores)."""
    corpus = read_labelled(require_shared("grobid/date/date-220311.train"))
    vectors = require_shared("w2v-conll-grobid-100d.txt", kind="embeddings")
    directory = tmp_path_factory.mktemp("date-onnx")
    train = replace(corpus, sequences=[s for i, s in enumerate(corpus.sequences) if i % TEST_EVERY])
    test = replace(corpus, sequences=corpus.sequences[::TEST_EVERY])
    assert len(test.sequences) == 64
    embeddings = open_embeddings(str(vectors), cache_dir=directory / "cache")
    labeler = SequenceLabeler.build(train, ModelConfig(), DataConfig(embeddings=str(vectors)), embeddings, seed=1)
    labeler.fit(train, None, TrainConfig(seed=1, max_epoch=10, early_stop=False))
    labeler.save(directory / "model")
    return directory / "model", test, labeler.evaluate(test)


def _load(model_dir: Path) -> SequenceLabeler:
    return SequenceLabeler.load(model_dir, cache_dir=str(model_dir.parent / "cache"))


def test_onnx_engine_gives_pytorch_labels_and_scores_on_a_real_model(date_model) -> None:
    model_dir, test, torch_scores = date_model
    labeler = _load(model_dir)
    expected = labeler.predict(test.sequences)
    attach_onnx(labeler, model_dir, model_dir.parent / "onnx")
    assert labeler.runner is not None
    got = labeler.predict(test.sequences)
    assert [p.labels for p in got] == [p.labels for p in expected]
    for a, b in zip(expected, got):
        np.testing.assert_allclose(b.scores, a.scores, atol=1e-4)
    assert labeler.evaluate(test)["f1"] == pytest.approx(torch_scores["f1"], abs=1e-12)


def test_int8_model_changes_f1_by_under_one_point_on_a_real_model(date_model) -> None:
    model_dir, test, torch_scores = date_model
    labeler = _load(model_dir)
    expected = labeler.predict(test.sequences, with_scores=False)
    export = attach_onnx(labeler, model_dir, model_dir.parent / "onnx-int8", quantized=True)
    assert labeler.runner is not None and (export / "model.int8.onnx").is_file()
    got = labeler.predict(test.sequences, with_scores=False)
    agreement = np.mean([a == b for x, y in zip(expected, got) for a, b in zip(x.labels, y.labels)])
    assert agreement >= 0.98, agreement
    assert torch_scores["f1"] >= 0.9  # a trained model, so that the comparison means something
    assert abs(labeler.evaluate(test)["f1"] - torch_scores["f1"]) < 0.01
