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
from textorch.runtime.precision import check_inference_precision, cpu_has_native_bf16, inference_autocast
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler
from textorch.models import onednn_lstm
from textorch.models.onednn_lstm import laid_out_lstm_available
from textorch.models.token_vector_cache import TokenVectorCache

from conftest import cli_tagged_rows, cli_trained_tagger, trained_once

_TRAINED: dict = {}


def _labeler(tiny_conll: Path) -> SequenceLabeler:
    labeler = trained_once(_TRAINED, "conll", lambda: train_sequence_labeler(tiny_conll, max_epoch=3, seed=3, word_hidden=16, char_hidden=8))
    labeler.precision = "fp32"
    labeler.token_vector_cache = TokenVectorCache()
    return labeler


def _sequences() -> list[TokenSequence]:
    """Ten sequences: enough for one batch to run in bf16 (``BF16_MIN_ROWS``)."""
    texts = ["John lives in Paris .", "Mary met Peter in Rome", "EU rejects German call to boycott British lamb .",
             "Paris , Paris , Madrid", "Peter Blackburn", "The European Commission said on Thursday",
             "Germany 's representative", "Spain and France", "Anna ☃ Berlin", "Rome"]
    return [TokenSequence(text.split()) for text in texts]


def _emission_inputs(labeler: SequenceLabeler, seen: list[torch.dtype]):
    """Record the dtype of the emission scores of every forward pass: bfloat16 under autocast."""
    return labeler.model.head.emissions.register_forward_hook(lambda m, inputs, out: seen.append(out.dtype))


def test_bf16_tagging_runs_in_bfloat16_and_stays_close_to_fp32(tiny_conll: Path) -> None:
    labeler = _labeler(tiny_conll)
    sequences = _sequences()
    seen: list[torch.dtype] = []
    hook = _emission_inputs(labeler, seen)  # lengths 1-9: the word BiLSTM runs packed, in fp32
    try:
        exact = labeler.predict(sequences, batch_size=10)
        assert seen == [torch.float32]
        seen.clear()
        labeler.precision = "bf16"
        labeler.token_vector_cache.clear()
        fast = labeler.predict(sequences, batch_size=10)
        assert seen == [torch.bfloat16]
    finally:
        hook.remove()
    labels = [(a, b) for p, q in zip(exact, fast) for a, b in zip(p.labels, q.labels)]
    agree = sum(a == b for a, b in labels) / len(labels)
    scores = np.array([x for p in exact for x in p.scores]), np.array([x for p in fast for x in p.scores])
    assert agree >= 0.9, agree
    assert 0 < np.abs(scores[0] - scores[1]).max() < 0.05  # rounded, not the same numbers, yet close
    assert all(isinstance(x, float) for p in fast for x in p.scores)


@pytest.mark.skipif(not (cpu_has_native_bf16() and laid_out_lstm_available(torch.bfloat16)),
                    reason="bfloat16 weights are laid out once only on CPUs with native bfloat16")
def test_bf16_tagging_lays_out_bfloat16_lstm_weights_once(tiny_conll: Path) -> None:
    """A batch that does not pack (rows of similar length) runs both BiLSTMs with bfloat16
    weights laid out once, beside the fp32 ones, and keeps fp32's labels on this easy input."""
    labeler = _labeler(tiny_conll)
    sequences = [TokenSequence(f"Peter met Mary in Rome on day {i} .".split()) for i in range(12)]
    exact = labeler.predict(sequences, batch_size=12)
    labeler.precision = "bf16"
    labeler.token_vector_cache.clear()
    fast = labeler.predict(sequences, batch_size=12)
    lstms = [m for m in labeler.model.modules() if isinstance(m, torch.nn.LSTM)]
    assert len(lstms) == 2  # the character and the word BiLSTM
    for lstm in lstms:
        kept = onednn_lstm._laid_out[lstm]
        assert torch.bfloat16 in {key[-1] for key in kept}
        assert all(entry.weight_ih.dtype == key[-1] for key, entry in kept.items())
    assert [p.labels for p in fast] == [p.labels for p in exact]
    assert max(abs(a - b) for p, q in zip(exact, fast) for a, b in zip(p.scores, q.scores)) < 0.05


def test_small_batches_stay_fp32_under_bf16(tiny_conll: Path) -> None:
    """Below ``BF16_MIN_ROWS`` sequences bf16 costs more than it saves: such batches run fp32,
    with exactly fp32's answers, while the call's full batches run bf16."""
    labeler = _labeler(tiny_conll)
    sequences = _sequences()
    exact = labeler.predict(sequences, batch_size=8)
    labeler.precision = "bf16"
    seen: list[torch.dtype] = []
    hook = _emission_inputs(labeler, seen)
    try:
        single = [labeler.predict([s], batch_size=1)[0] for s in sequences]
        assert seen == [torch.float32] * len(sequences)
        seen.clear()
        labeler.predict(sequences, batch_size=8)  # 8 sequences, then the last 2
        assert seen == [torch.bfloat16, torch.float32]
    finally:
        hook.remove()
    assert np.allclose([x for p in single for x in p.scores], [x for p in exact for x in p.scores], atol=1e-6)


def test_kept_character_vectors_never_cross_between_fp32_and_bf16(tiny_conll: Path) -> None:
    labeler = _labeler(tiny_conll)
    sequences = _sequences()
    kept, labeler.token_vector_cache = labeler.token_vector_cache, None
    exact = labeler.predict(sequences, batch_size=10)
    labeler.precision = "bf16"
    rounded = labeler.predict(sequences, batch_size=10)
    assert [p.scores for p in rounded] != [p.scores for p in exact]
    labeler.token_vector_cache, labeler.precision = kept, "bf16"
    assert [p.scores for p in labeler.predict(sequences, batch_size=10)] == [p.scores for p in rounded]
    labeler.precision = "fp32"  # the cache holds bf16 vectors: they must not be served here
    assert [p.scores for p in labeler.predict(sequences, batch_size=10)] == [p.scores for p in exact]
    misses = kept.misses  # both kinds are kept now, apart: alternating calls compute nothing more
    for precision, expected in (("bf16", rounded), ("fp32", exact), ("bf16", rounded)):
        labeler.precision = precision
        assert [p.scores for p in labeler.predict(sequences, batch_size=10)] == [p.scores for p in expected]
    char_id = labeler.encoder.chars.id  # tokens of the same character ids share an entry
    distinct = {tuple(char_id(c) for c in t) for s in sequences for t in s.tokens}
    assert kept.misses == misses and len(kept) == 2 * len(distinct)


def test_bf16_classification_stays_close_to_fp32() -> None:
    from tiny_classification import _train, tiny_examples

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
    monkeypatch.setattr("textorch.runtime.precision.cpu_has_native_bf16", lambda: False)
    with caplog.at_level(logging.WARNING, logger="textorch.runtime.precision"):
        check_inference_precision("bf16", "cpu")
    assert "no native bfloat16" in caplog.text


def test_cli_tags_with_bf16_and_refuses_it_with_onnx(tmp_path: Path, tiny_conll: Path, capsys: pytest.CaptureFixture) -> None:
    model = cli_trained_tagger(tmp_path / "model", tiny_conll)
    outputs = {precision: cli_tagged_rows(model, tiny_conll, "conll", tmp_path / f"{precision}.conll", "--precision", precision)
               for precision in ("fp32", "bf16")}
    assert len(outputs["bf16"]) == len(outputs["fp32"]) > 0
    assert [row[0] for row in outputs["bf16"]] == [row[0] for row in outputs["fp32"]]  # every token, in order
    capsys.readouterr()
    assert main(["seq", "tag", "--model", str(model), "--input", str(tiny_conll), "--input-format", "conll",
                 "--engine", "onnx", "--precision", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "--precision bf16 needs --engine torch" in err and "Traceback" not in err


def test_the_bf16_lstm_probe_says_what_this_cpu_does() -> None:
    from textorch.models.padded_rnn import cpu_lstm_takes_bf16

    lstm = torch.nn.LSTM(3, 5, batch_first=True)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            ran = lstm(torch.randn(2, 4, 3))[0].dtype == torch.bfloat16
        except RuntimeError:  # AVX2-only CPUs: no oneDNN bfloat16 LSTM
            ran = False
    assert cpu_lstm_takes_bf16() is ran


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstms_run_fp32_under_bf16_where_the_cpu_cannot(monkeypatch: pytest.MonkeyPatch, bidirectional: bool) -> None:
    from textorch.models.padded_rnn import rnn_final_states, rnn_outputs

    monkeypatch.setattr("textorch.models.padded_rnn.cpu_lstm_takes_bf16", lambda: False)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(6, 4, batch_first=True, bidirectional=bidirectional).eval()
    x, lengths = torch.randn(3, 7, 6), torch.tensor([7, 4, 1])
    with torch.no_grad():
        exact = rnn_outputs(lstm, x, lengths), rnn_final_states(lstm, x, lengths), rnn_outputs(lstm, x[:1], lengths[:1])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            guarded = rnn_outputs(lstm, x, lengths), rnn_final_states(lstm, x, lengths), rnn_outputs(lstm, x[:1], lengths[:1])
            assert torch.is_autocast_enabled("cpu")  # switched off only around the recurrent layer
    for a, b in zip(exact, guarded):
        assert b.dtype == torch.float32 and torch.equal(a, b)
