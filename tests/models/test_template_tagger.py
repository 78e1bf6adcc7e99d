"""BidLSTM_CRF_FEATURES_TEMPLATE: a CRF's template features added to the BiLSTM-CRF's emissions.

Trained on the tiny GROBID fixture, it must learn weights for its template features, give the
same labels and scores on every route (batches, one-sequence calls, a reloaded directory,
ONNX Runtime, see tests/onnx/test_onnx.py), and keep the template it was trained with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import trained_once
from textorch.data.readers import read_labelled
from textorch.errors import DataError
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.tagging.labeler import SequenceLabeler

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=12, feature_dim=3, feature_output_dim=8, dropout=0.1)
TEMPLATE = "# a GROBID-style template\nU00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[0,2]/%x[1,2]\nU03:%x[1,3]\n\nB\n"
_CACHE: dict[str, SequenceLabeler] = {}


def _trained(tiny_grobid: Path, template: Path | None = None) -> SequenceLabeler:
    def train() -> SequenceLabeler:
        corpus = read_labelled(tiny_grobid)
        config = ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", crf_template=str(template) if template else None, **SMALL)
        labeler = SequenceLabeler.build(corpus, config, DataConfig(), seed=1)
        labeler.fit(corpus, None, TrainConfig(max_epoch=3, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
        return labeler

    return trained_once(_CACHE, str(template), train)


def test_template_weights_are_learned_and_count(tiny_grobid: Path) -> None:
    labeler = _trained(tiny_grobid)
    part = labeler.model.template_emissions
    assert part.weight.shape == (labeler.encoder.templates.n_rows, len(labeler.encoder.labels))
    assert float(part.weight.detach()[1:].abs().max()) > 0  # training reached the feature weights
    assert float(part.weight.detach()[0].abs().max()) == 0  # row 0, an unseen feature, weighs nothing
    sequences = read_labelled(tiny_grobid).sequences
    batch = labeler.encode(sequences[:4]).batch([0, 1, 2, 3])
    with torch.no_grad():
        extra = labeler.model.extra_emissions(batch)
    assert extra.shape == (*batch.mask.shape, len(labeler.encoder.labels))
    assert float(extra.abs().max()) > 0


def test_one_sequence_calls_equal_the_batch_route(tiny_grobid: Path) -> None:
    labeler = _trained(tiny_grobid)
    sequences = read_labelled(tiny_grobid).sequences
    batched = labeler.predict(sequences, batch_size=7)
    _, route = labeler._model_routes()
    assert route is not None and route.template_emissions is not None  # the one-sequence route serves it
    for sequence, expected in zip(sequences[:8], batched):
        single = labeler.predict([sequence])[0]
        assert single.labels == expected.labels
        np.testing.assert_allclose(single.scores, expected.scores, atol=1e-5)


def test_saved_model_keeps_its_template_and_table(tiny_grobid: Path, tmp_path: Path) -> None:
    template = tmp_path / "date.crf-template"
    template.write_text(TEMPLATE, encoding="utf-8")
    labeler = _trained(tiny_grobid, template)
    assert [t.name for t in labeler.encoder.templates.templates] == ["U00", "U01", "U02", "U03"]
    target = labeler.save(tmp_path / "model")
    template.unlink()  # the saved model needs the file no more
    config = json.loads((target / "config.json").read_text())
    assert config["builder"] == "rnn_tagger.v4"
    loaded = SequenceLabeler.load(target, engine="torch")  # the same network: the same scores, bit for bit
    assert np.array_equal(loaded.encoder.templates.table, labeler.encoder.templates.table)
    sequences = read_labelled(tiny_grobid).sequences
    before, after = labeler.predict(sequences), loaded.predict(sequences)
    assert [p.labels for p in after] == [p.labels for p in before]
    assert [p.scores for p in after] == [p.scores for p in before]


def test_a_template_reading_a_missing_column_names_the_file(tiny_grobid: Path, tmp_path: Path) -> None:
    template = tmp_path / "wide.crf-template"
    template.write_text("U00:%x[0,9]\n", encoding="utf-8")  # the fixture has 4 feature columns
    corpus = read_labelled(tiny_grobid)
    with pytest.raises(DataError, match="wide.crf-template: template U00 reads column 9, but the data has columns 0-4"):
        SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", crf_template=str(template)),
                              DataConfig())


def _names_file(path: Path) -> Path:
    """Fields of several tokens (labels ``I-<x>`` to rule moves for); every fifth sequence opens
    with a continuation label, as some GROBID files do (read as ``I-<forename>`` first)."""
    rows = []
    for i in range(30):
        first, second, last = ["Jean", "Anna", "Li"][i % 3], ["Paul", "Maria", "Wei"][i % 3], ["Dupont", "Rossi", "Zhang"][i % 3]
        opening = "<forename>" if i % 5 == 0 else "I-<forename>"
        block = [(first, opening), (second, "<forename>"), (last, "I-<surname>"), (",", "<other>")]
        rows.append("\n".join(f"{token} {token[0].isupper()} {j} {label}" for j, (token, label) in enumerate(block)))
    path.write_text("\n\n".join(rows) + "\n\n", encoding="utf-8")
    return path


def test_the_crf_rules_out_iob2_impossible_moves_and_training_keeps_them_out(tmp_path: Path) -> None:
    from textorch.data.tags import iob2_forbidden
    from textorch.models.crf import FORBIDDEN_SCORE

    corpus = read_labelled(_names_file(tmp_path / "names.train"))
    assert any(s.labels[0].startswith("I-") for s in corpus.sequences)  # a forbidden opening in the gold
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", **SMALL),
                                    DataConfig(), seed=1)
    result = labeler.fit(corpus, None, TrainConfig(max_epoch=3, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    # the gold was made valid IOB2 first: no sequence pays a forbidden score in its loss
    assert all(record.loss < 100 for record in result.history)
    labels = labeler.encoder.labels.items
    forbidden, at_start = (torch.tensor(m) for m in iob2_forbidden(labels))
    crf = labeler.model.head.crf
    assert forbidden.any() and at_start.any()
    assert (crf.transitions.detach()[forbidden] == FORBIDDEN_SCORE).all()  # three epochs did not move them
    assert (crf.start_transitions.detach()[at_start] == FORBIDDEN_SCORE).all()
    assert (crf.transitions.detach()[~forbidden] > FORBIDDEN_SCORE / 2).all()
    labeler.save(tmp_path / "model")
    reloaded = SequenceLabeler.load(tmp_path / "model")
    assert torch.equal(reloaded.model.head.crf.transitions, crf.transitions)
    for prediction in reloaded.predict(corpus.sequences):
        ids = [labels.index(label) for label in prediction.labels]
        assert not at_start[ids[0]] and not any(forbidden[a, b] for a, b in zip(ids, ids[1:]))


def test_learned_transitions_are_all_left_to_training(tmp_path: Path) -> None:
    from textorch.errors import ConfigError
    from textorch.models.crf import FORBIDDEN_SCORE

    corpus = read_labelled(_names_file(tmp_path / "names.train"))
    config = ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", crf_transitions="learned", **SMALL)
    learned = SequenceLabeler.build(corpus, config, DataConfig(), seed=1).model.head.crf
    fixed = SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", **SMALL),
                                  DataConfig(), seed=1).model.head.crf
    assert (fixed.transitions == FORBIDDEN_SCORE).any() and (fixed.start_transitions == FORBIDDEN_SCORE).any()
    assert (learned.transitions.detach().abs() < 1).all() and (learned.start_transitions.detach().abs() < 1).all()
    with pytest.raises(ConfigError, match="crf_transitions must be one of"):
        ModelConfig(architecture="BidLSTM_CRF_FEATURES_TEMPLATE", crf_transitions="strict")


def test_int32_rows_give_the_weights_and_gradients_int64_rows_give() -> None:
    """Encoded rows are int32 (half the memory of a corpus's rows); the sums over them and the
    gradient of the weights are those of int64 rows, in training (dropout drawn the same) too."""
    from textorch.models.template_emissions import TemplateEmissions

    rows = torch.randint(0, 50, (3, 7, 5))
    results = []
    for dtype in (torch.int32, torch.int64):
        part = TemplateEmissions(50, 4, dropout=0.3)
        with torch.no_grad():
            part.weight.copy_(torch.arange(200, dtype=torch.float32).reshape(50, 4) / 7)
        torch.manual_seed(3)
        out = part(rows.to(dtype))
        out.pow(2).sum().backward()
        part.eval()
        results.append((out.detach(), part.weight.grad.clone(), part(rows.to(dtype)).detach()))
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_training_sums_skip_row_zero_and_dropped_features_and_leave_row_zero_untrained() -> None:
    """In training each token sums the weights of its rows other than row 0 (padding, absent
    features) and other than the features dropout leaves out (the same draw as a mask over the
    rows); row 0 gets no gradient. Checked against the sums written out, token by token."""
    from textorch.models.template_emissions import TemplateEmissions

    rows = torch.randint(0, 30, (2, 6, 4))
    rows[0, 0] = 0  # a token with no feature at all sums to zero
    part = TemplateEmissions(30, 3, dropout=0.4)
    with torch.no_grad():
        part.weight.copy_(torch.randn(30, 3))
        part.weight[0] = 0
    torch.manual_seed(5)
    out = part(rows)
    torch.manual_seed(5)
    kept = torch.rand(rows.reshape(-1, 4).shape) >= 0.4
    flat = rows.reshape(-1, 4)
    expected = torch.stack([part.weight[flat[i][kept[i] & (flat[i] != 0)]].sum(dim=0) for i in range(flat.shape[0])])
    torch.testing.assert_close(out.reshape(-1, 3), expected)
    assert out[0, 0].eq(0).all()
    (out * torch.randn(out.shape)).sum().backward()
    assert part.weight.grad[0].eq(0).all() and part.weight.grad[1:].abs().sum() > 0


def test_batches_carry_the_encoded_int32_rows(tiny_grobid: Path) -> None:
    labeler = _trained(tiny_grobid)
    sequences = read_labelled(tiny_grobid).sequences
    data = labeler.encode(sequences[:4])
    assert data.encoded[0].template_rows.dtype == np.int32
    for indices in ([0, 1, 2, 3], [2]):
        batch = data.batch(indices)
        assert batch.template_rows.dtype == torch.int32
        with torch.no_grad():
            assert torch.equal(labeler.model.extra_emissions(batch),
                               labeler.model.template_emissions(batch.template_rows.long()))
