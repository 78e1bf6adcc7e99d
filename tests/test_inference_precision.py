"""``--precision bf16`` for tagging and classification: the network really runs in bfloat16,
answers stay close to fp32's, kept character vectors never cross between the two, and the
options that cannot go together are refused."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from textorch.cli.main import main
from textorch.data.corpus import TokenSequence
from textorch.errors import ConfigError
from textorch.inference_precision import check_inference_precision, inference_autocast
from textorch.labeler import SequenceLabeler
from textorch.models.token_vector_cache import TokenVectorCache

from conftest import trained_once

_TRAINED: dict = {}


def _labeler(tiny_conll: Path) -> SequenceLabeler:
    labeler = trained_once(_TRAINED, "conll", lambda: SequenceLabeler.train(tiny_conll, max_epoch=3, seed=3, word_hidden=16, char_hidden=8))
    labeler.precision = "fp32"
    labeler.token_vector_cache = TokenVectorCache()
    return labeler


def _sequences() -> list[TokenSequence]:
    texts = ["John lives in Paris .", "Mary met Peter in Rome", "EU rejects German call to boycott British lamb .",
             "Paris , Paris , Madrid", "Peter Blackburn"]
    return [TokenSequence(text.split()) for text in texts]


def test_bf16_tagging_runs_in_bfloat16_and_stays_close_to_fp32(tiny_conll: Path) -> None:
    labeler = _labeler(tiny_conll)
    sequences = _sequences()
    seen: list[torch.dtype] = []  # what the emission layer receives: the BiLSTM's output
    hook = labeler.model.head.emissions.register_forward_hook(lambda m, inputs, out: seen.append(inputs[0].dtype))
    try:
        exact = labeler.predict(sequences, batch_size=2)
        assert set(seen) == {torch.float32}
        seen.clear()
        labeler.precision = "bf16"
        labeler.token_vector_cache.clear()
        fast = labeler.predict(sequences, batch_size=2)
        assert set(seen) == {torch.bfloat16}
    finally:
        hook.remove()
    labels = [(a, b) for p, q in zip(exact, fast) for a, b in zip(p.labels, q.labels)]
    agree = sum(a == b for a, b in labels) / len(labels)
    scores = np.array([x for p in exact for x in p.scores]), np.array([x for p in fast for x in p.scores])
    assert agree >= 0.9, agree
    assert 0 < np.abs(scores[0] - scores[1]).max() < 0.05  # rounded, not the same numbers, yet close
    assert all(isinstance(x, float) for p in fast for x in p.scores)


def test_kept_character_vectors_never_cross_between_fp32_and_bf16(tiny_conll: Path) -> None:
    labeler = _labeler(tiny_conll)
    sequences = _sequences()
    kept, labeler.token_vector_cache = labeler.token_vector_cache, None
    exact = labeler.predict(sequences, batch_size=1)
    labeler.precision = "bf16"
    rounded = labeler.predict(sequences, batch_size=1)
    labeler.token_vector_cache, labeler.precision = kept, "bf16"
    assert [p.scores for p in labeler.predict(sequences, batch_size=1)] == [p.scores for p in rounded]
    labeler.precision = "fp32"  # the cache holds bf16 vectors now: they must not be served
    assert [p.scores for p in labeler.predict(sequences, batch_size=1)] == [p.scores for p in exact]
    labeler.precision = "bf16"
    assert [p.scores for p in labeler.predict(sequences, batch_size=1)] == [p.scores for p in rounded]


def test_bf16_classification_stays_close_to_fp32() -> None:
    from test_classification import _train, tiny_examples

    from textorch.data.cls_readers import ClsCorpus

    classifier, _ = _train(ClsCorpus(tiny_examples()), architecture="lstm", epochs=2)
    texts = [e.text for e in tiny_examples(12, seed=7)]
    exact = classifier.predict_logits(texts)
    classifier.precision = "bf16"
    rounded = classifier.predict_logits(texts)
    assert rounded.dtype == np.float32 and rounded.shape == exact.shape
    assert 0 < np.abs(rounded - exact).max() < 0.05 * max(1.0, float(np.abs(exact).max()))


def test_precision_checks(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    check_inference_precision("fp32", "cpu", "onnx")  # fp32 goes with every engine
    with pytest.raises(ConfigError, match="--precision bf16 needs --engine torch"):
        check_inference_precision("bf16", "cpu", "onnx")
    with pytest.raises(ConfigError, match="--precision must be one of fp32, bf16, got 'fp16'"):
        check_inference_precision("fp16")
    with pytest.raises(ConfigError, match="got 'int8'"):
        inference_autocast("int8", "cpu")
    monkeypatch.setattr("textorch.inference_precision._cpu_has_native_bf16", lambda: False)
    with caplog.at_level(logging.WARNING, logger="textorch.inference_precision"):
        check_inference_precision("bf16", "cpu")
    assert "no native bfloat16" in caplog.text


def test_cli_tags_with_bf16_and_refuses_it_with_onnx(tmp_path: Path, tiny_conll: Path, capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "model"
    assert main(["seq", "train", "--train", str(tiny_conll), "--output", str(model), "--max-epoch", "1",
                 "--batch-size", "8", "--early-stop", "false"]) == 0
    outputs = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / f"{precision}.conll"
        assert main(["seq", "tag", "--model", str(model), "--input", str(tiny_conll), "--input-format", "conll",
                     "--output", str(out), "--precision", precision]) == 0
        outputs[precision] = [line.split() for line in out.read_text().splitlines() if line.strip()]
    assert len(outputs["bf16"]) == len(outputs["fp32"]) > 0
    assert [row[0] for row in outputs["bf16"]] == [row[0] for row in outputs["fp32"]]  # every token, in order
    capsys.readouterr()
    assert main(["seq", "tag", "--model", str(model), "--input", str(tiny_conll), "--input-format", "conll",
                 "--engine", "onnx", "--precision", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "--precision bf16 needs --engine torch" in err and "Traceback" not in err
