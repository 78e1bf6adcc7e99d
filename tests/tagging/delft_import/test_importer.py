"""Models made by DeLFT 1.2.0 (``tests/fixtures/delft-1.2``, see make_delft_fixtures.py) imported
into textorch: labels equal DeLFT's own ``Sequence.tag`` labels on every token."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from textorch.data.corpus import TokenSequence
from textorch.errors import ConfigError, ModelFormatError
from textorch.tagging.delft_import.importer import (
    convert_delft_model,
    converted_dir,
    is_delft_model_dir,
)
from textorch.tagging.labeler import SequenceLabeler

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "delft-1.2"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
ARCHITECTURES = list(EXPECTED["labels"])


def delft_state(architecture: str) -> dict[str, torch.Tensor]:
    weights = json.loads((FIXTURES / architecture / "weights.json").read_text(encoding="utf-8"))
    return {name: torch.tensor(t["values"], dtype=torch.float32).reshape(t["shape"]) for name, t in weights.items()}


def delft_dir(tmp_path: Path, architecture: str, pickled: bool = False) -> Path:
    """The DeLFT model directory of the fixture, weights as DeLFT >= 1.2 or <= 1.1 writes them."""
    from safetensors.torch import save_file

    target = tmp_path / f"delft-{architecture}"
    target.mkdir()
    for name in ("config.json", "preprocessor.json", "transformer-config.json"):
        if (FIXTURES / architecture / name).is_file():
            shutil.copy(FIXTURES / architecture / name, target / name)
    if (FIXTURES / architecture / "transformer-tokenizer").is_dir():
        shutil.copytree(FIXTURES / architecture / "transformer-tokenizer", target / "transformer-tokenizer")
    state = delft_state(architecture)
    if pickled:
        torch.save(state, target / "model_weights.pt")
    else:
        save_file(state, str(target / "model.safetensors"))
    return target


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def sequences(with_features: bool) -> list[TokenSequence]:
    return [TokenSequence(list(tokens), None, features=list(features) if with_features else None)
            for tokens, features in zip(EXPECTED["tokens"], EXPECTED["features"])]


def labels_of(labeler: SequenceLabeler, batch_size: int = 32) -> list[list[str]]:
    predictions = labeler.predict(sequences(labeler.n_features > 0), batch_size=batch_size, with_scores=False)
    return [p.labels for p in predictions]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_imported_labels_equal_delft_labels(tmp_path, cache, architecture):
    out = convert_delft_model(delft_dir(tmp_path, architecture), tmp_path / "imported", FIXTURES / "vectors.txt")
    labeler = SequenceLabeler.load(out)
    assert labels_of(labeler) == EXPECTED["labels"][architecture]
    # one sequence at a time takes textorch's one-sequence path where the model has one
    one_by_one = [labeler.predict([s], with_scores=False)[0].labels for s in sequences(labeler.n_features > 0)]
    assert one_by_one == EXPECTED["labels"][architecture]


def test_pickled_weights_of_delft_1_1_import_the_same(tmp_path, cache):
    source = delft_dir(tmp_path, "BidLSTM_CRF", pickled=True)
    labeler = SequenceLabeler.load(convert_delft_model(source, tmp_path / "imported", FIXTURES / "vectors.txt"))
    assert labels_of(labeler, batch_size=4) == EXPECTED["labels"]["BidLSTM_CRF"]


def test_pickled_weights_holding_more_than_tensors_are_refused(tmp_path, cache):
    source = delft_dir(tmp_path, "BidLSTM_CRF", pickled=True)
    torch.save({"weights": delft_state("BidLSTM_CRF"), "note": Path("any object")}, source / "model_weights.pt")
    with pytest.raises(ModelFormatError, match="model_weights.pt"):
        convert_delft_model(source, tmp_path / "imported", FIXTURES / "vectors.txt")


def test_delft_directories_are_told_from_textorch_ones(tmp_path, cache):
    source = delft_dir(tmp_path, "BidLSTM_CRF")
    assert is_delft_model_dir(source)
    out = convert_delft_model(source, tmp_path / "imported", FIXTURES / "vectors.txt")
    assert not is_delft_model_dir(out)
    assert not is_delft_model_dir(tmp_path / "missing")
    config = json.loads((out / "config.json").read_text())
    assert config["builder"] == "rnn_tagger.v2" and config["data"]["word_lookup"] == "delft"
    labeler = SequenceLabeler.load(out)
    assert labeler.encoder.labels.items[0] == "O" and "<PAD>" in labeler.encoder.labels.items
    assert labeler.label_names == ["<day>", "<month>", "<year>"]


def test_load_converts_a_delft_directory_once_into_the_cache(tmp_path, cache):
    source = delft_dir(tmp_path, "BidLSTM_CRF_FEATURES")
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    from textorch.embeddings import open_embeddings

    vectors = open_embeddings(str(FIXTURES / "vectors.txt"))
    labeler = SequenceLabeler.load(source, embeddings=vectors)
    assert labels_of(labeler) == EXPECTED["labels"]["BidLSTM_CRF_FEATURES"]
    target = converted_dir(source, embeddings=vectors)
    assert target.parent.parent == cache and (target / "config.json").is_file()
    stamp = (target / "config.json").stat().st_mtime_ns
    SequenceLabeler.load(source, embeddings=vectors)
    assert (target / "config.json").stat().st_mtime_ns == stamp  # reused, not converted again
    assert {p.name: p.read_bytes() for p in source.iterdir()} == before  # the source is never written


def assert_refused_by_name(source: Path, architecture: str, out: Path) -> None:
    """Importing ``source`` relabelled as ``architecture`` fails with one error naming it."""
    config = json.loads((source / "config.json").read_text())
    config["architecture"] = architecture
    (source / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=architecture):
        convert_delft_model(source, out, FIXTURES / "vectors.txt")


@pytest.mark.parametrize("architecture", ["BidLSTM_ChainCRF", "BidLSTM_CNN", "BERT_CRF_FEATURES", "BERT"])
def test_an_architecture_without_mapping_is_named(tmp_path, cache, architecture):
    assert_refused_by_name(delft_dir(tmp_path, "BidLSTM_CRF"), architecture, tmp_path / "imported")


def test_word_vectors_of_another_size_are_refused(tmp_path, cache):
    vectors = tmp_path / "vectors-3d.txt"
    vectors.write_text("june 0.1 0.2 0.3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="6 dimensions"):
        convert_delft_model(delft_dir(tmp_path, "BidLSTM_CRF"), tmp_path / "imported", str(vectors))


def test_delft_lookup_normalises_digits_and_never_lowercases(tmp_path, cache):
    from textorch.embeddings import open_embeddings
    from textorch.embeddings.lookup import DelftLookup

    path = tmp_path / "vectors.txt"
    path.write_text("june 1 1\n0000 2 2\n", encoding="utf-8")
    vectors = open_embeddings(str(path))
    found = DelftLookup(vectors).lookup(["June", "june", "1999", "２０２０", "1999x"])[1]
    assert found.tolist() == [False, True, True, True, False]
    assert vectors.lookup(["June"])[1].tolist() == [True]  # textorch's own rule falls back to lower case
