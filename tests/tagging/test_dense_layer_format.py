"""The dense layer before the output: written by new models (builder ``rnn_tagger.v2``), absent
from format-1 directories, which still load; bad settings refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from short_sequences import short_sequences
from torch import nn

from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler


def test_new_models_have_the_dense_layer_and_old_configs_do_not(tiny_conll: Path, tmp_path: Path) -> None:
    import json

    labeler = train_sequence_labeler(tiny_conll, max_epoch=1, seed=1, word_hidden=8, char_hidden=4, dense_hidden=6,
                                     output=tmp_path / "model")
    assert isinstance(labeler.model.head.emissions, nn.Sequential)
    assert labeler.model.head.emissions[0].out_features == 6
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["model"]["dense_hidden"] == 6
    reloaded = SequenceLabeler.load(tmp_path / "model")
    sequences = short_sequences()
    assert [p.labels for p in reloaded.predict(sequences)] == [p.labels for p in labeler.predict(sequences)]
    plain = train_sequence_labeler(tiny_conll, max_epoch=1, seed=1, word_hidden=8, char_hidden=4, dense_hidden=0)
    assert isinstance(plain.model.head.emissions, nn.Linear)


def test_v1_directories_load_without_the_dense_layer_and_v2_is_written(tiny_conll: Path, tmp_path: Path) -> None:
    import json

    from model_fixture import v1_model_dir

    from textorch.model_dir import load_model_dir

    old = SequenceLabeler.load(v1_model_dir(tmp_path / "v1"))
    assert isinstance(old.model.head.emissions, nn.Linear) and old.model_config.dense_hidden == 0
    train_sequence_labeler(tiny_conll, max_epoch=1, seed=1, word_hidden=8, char_hidden=4, output=tmp_path / "m")
    config, _, _ = load_model_dir(tmp_path / "m")
    assert config["builder"] == "rnn_tagger.v2" and config["model"]["dense_hidden"] == 100
    config["builder"] = "rnn_tagger.v9"
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(Exception, match="rnn_tagger.v9"):
        SequenceLabeler.load(tmp_path / "m")


def test_bad_dense_and_dropout_settings_are_refused() -> None:
    from textorch.errors import ConfigError
    from torch import nn

    from textorch.models.tagger import SequenceTagger
    from textorch.tagging.config import ModelConfig

    with pytest.raises(ConfigError, match="dense_hidden must be >= 0"):
        ModelConfig(dense_hidden=-1)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        SequenceTagger(nn.ModuleList(), nn.Identity(), nn.Identity(), 1.0)
