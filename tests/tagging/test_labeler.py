"""Train -> save -> load -> identical predictions, on tiny data, for the core architectures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError, ModelFormatError
from textorch.tagging.labeler import SequenceLabeler
from textorch.model_dir import CONFIG_FILE, WEIGHTS_FILE

SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, feature_dim=3, feature_output_dim=8, dropout=0.1)


def _train(path: Path, architecture: str, epochs: int = 3) -> tuple[SequenceLabeler, object]:
    corpus = read_labelled(path)
    labeler = SequenceLabeler.build(corpus, ModelConfig(architecture=architecture, **SMALL), DataConfig(), seed=1)
    result = labeler.fit(corpus, None, TrainConfig(max_epoch=epochs, batch_size=8, learning_rate=0.01, early_stop=False, seed=1))
    return labeler, result


@pytest.mark.parametrize("architecture", ["BidLSTM_CRF", "BidLSTM_CRF_FEATURES"])
def test_save_load_gives_identical_predictions(tiny_grobid: Path, tmp_path: Path, architecture: str) -> None:
    labeler, result = _train(tiny_grobid, architecture)
    assert result.history[-1].loss < result.history[0].loss
    corpus = read_labelled(tiny_grobid)
    before = labeler.predict(corpus.sequences)
    target = labeler.save(tmp_path / "model")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
    loaded = SequenceLabeler.load(target, engine="torch")  # the weights as saved, through the same network
    after = loaded.predict(corpus.sequences)
    assert [p.labels for p in before] == [p.labels for p in after]
    assert [p.scores for p in before] == [p.scores for p in after]
    by_default = SequenceLabeler.load(target).predict(corpus.sequences)  # auto: this small call in ONNX Runtime
    assert [p.labels for p in by_default] == [p.labels for p in before]
    assert [p.scores for p in by_default] == [pytest.approx(p.scores, abs=1e-4) for p in before]
    (target / "onnx").rename(tmp_path / "export")  # the export made on that first use, kept out of the listing
    config = json.loads((target / CONFIG_FILE).read_text())
    assert config["format_version"] == 1
    assert config["model"]["architecture"] == architecture
    size = sum(p.stat().st_size for p in target.iterdir())
    assert size < 5 * 1024 * 1024


def test_features_channel_uses_low_cardinality_columns(tiny_grobid: Path) -> None:
    labeler, _ = _train(tiny_grobid, "BidLSTM_CRF_FEATURES", epochs=1)
    # column 0 (lower-cased token) has many values; 1-3 (position, caps, punctuation) few
    assert labeler.encoder.feature_columns == [1, 2, 3]


def test_features_architecture_without_features_is_a_clear_error(tiny_conll: Path) -> None:
    corpus = read_labelled(tiny_conll)
    with pytest.raises(ConfigError, match="feature columns"):
        SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF_FEATURES"), DataConfig())


def test_training_is_repeatable_with_a_seed(tiny_conll: Path) -> None:
    first, _ = _train(tiny_conll, "BidLSTM_CRF", epochs=2)
    second, _ = _train(tiny_conll, "BidLSTM_CRF", epochs=2)
    for (name, a), (_, b) in zip(first.model.state_dict().items(), second.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_learns_tiny_conll(tiny_conll: Path) -> None:
    labeler, _ = _train(tiny_conll, "BidLSTM_CRF", epochs=12)
    scores = labeler.evaluate(read_labelled(tiny_conll))
    assert scores["f1"] > 0.9
    assert set(scores["per_label"]) == {"PER", "LOC"}


def test_tagging_never_drops_tokens_of_long_sequences(tiny_conll: Path) -> None:
    labeler, _ = _train(tiny_conll, "BidLSTM_CRF", epochs=1)
    from textorch.data.corpus import TokenSequence

    long_sequence = TokenSequence(["John", "lives", "in", "Paris", "."] * 300)
    (prediction,) = labeler.predict([long_sequence])
    assert len(prediction.labels) == 1500 and len(prediction.scores) == 1500


def test_loading_a_tampered_model_names_the_file(tiny_grobid: Path, tmp_path: Path) -> None:
    labeler, _ = _train(tiny_grobid, "BidLSTM_CRF", epochs=1)
    target = labeler.save(tmp_path / "model")
    weights = target / WEIGHTS_FILE
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="model.safetensors"):
        SequenceLabeler.load(target)


def test_newer_format_version_is_refused(tiny_grobid: Path, tmp_path: Path) -> None:
    labeler, _ = _train(tiny_grobid, "BidLSTM_CRF", epochs=1)
    target = labeler.save(tmp_path / "model")
    config = json.loads((target / CONFIG_FILE).read_text())
    config["format_version"] = 99
    (target / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ModelFormatError, match="newer"):
        SequenceLabeler.load(target)
