"""``--engine auto``'s per-call rule (calls of few tokens in sequences none of them long run in
ONNX Runtime), the one-sequence feed, and the session's thread count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

from textorch.data.readers import read_labelled  # noqa: E402
from textorch.onnx.engine import AutoRunner  # noqa: E402
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig  # noqa: E402
from textorch.tagging.labeler import SequenceLabeler  # noqa: E402

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)


def _saved(tmp_path: Path, data: Path) -> Path:
    corpus = read_labelled(data)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", **SMALL),
                                    DataConfig(embeddings="none"), seed=1)
    labeler.fit(corpus, None, TrainConfig(max_epoch=1, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    labeler.save(tmp_path / "model")
    return tmp_path / "model"


def test_long_sequences_run_in_pytorch_short_ones_in_the_graph_with_the_same_answers(
    tmp_path: Path, tiny_grobid: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _saved(tmp_path, tiny_grobid)
    sequences = read_labelled(tiny_grobid).sequences
    expected = SequenceLabeler.load(model, engine="torch").predict(sequences, batch_size=8)
    labeler = SequenceLabeler.load(model)  # auto
    assert isinstance(labeler.runner, AutoRunner)
    graph_calls: list[int] = []
    run = labeler.runner.onnx_runner.run
    monkeypatch.setattr(labeler.runner.onnx_runner, "run",
                        lambda output, feed: (graph_calls.append(feed["mask"].shape[1]), run(output, feed))[1])
    longest = max(len(s) for s in sequences)
    labeler.runner.max_length = longest - 1
    for one, want in zip(sequences, expected):  # one sequence a call: the graph below the length, else PyTorch
        graph_calls.clear()
        got = labeler.predict([one])[0]
        assert got.labels == want.labels
        np.testing.assert_allclose(got.scores, want.scores, atol=1e-4)
        assert graph_calls == ([] if len(one) > longest - 1 else [len(one)])
    graph_calls.clear()
    assert [p.labels for p in labeler.predict(sequences, batch_size=8)] == [p.labels for p in expected]
    assert graph_calls == []  # a call holding a long sequence: PyTorch
    labeler.runner.max_length = longest
    bare = labeler.predict(sequences, batch_size=8, with_scores=False)
    assert [p.labels for p in bare] == [p.labels for p in expected] and graph_calls


def test_a_session_without_a_thread_count_takes_pytorchs(tmp_path: Path, tiny_grobid: Path) -> None:
    model = _saved(tmp_path, tiny_grobid)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        labeler = SequenceLabeler.load(model)
    finally:
        torch.set_num_threads(before)
    assert labeler.runner.onnx_runner.session.get_session_options().intra_op_num_threads == 1
