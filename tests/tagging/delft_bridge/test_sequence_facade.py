"""DeLFT's ``Sequence`` over textorch: arguments, argument orders, loading rules, the importer seam."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import write_tiny_grobid
from textorch.data.readers import read_labelled
from textorch.errors import ConfigError, DataError, ModelFormatError
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.presets import GROBID_DEFAULT_ARCHITECTURE
from textorch.tagging.delft.facade import Sequence
from textorch.tagging.delft.grobid_tagger import textorch_arguments
from textorch.tagging.delft.reader import (
    load_data_and_labels_crf_file,
    load_data_crf_string,
)

TINY = {"max_epoch": 1, "word_lstm_units": 8, "char_lstm_units": 4, "char_emb_size": 4, "batch_size": 8}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    return load_data_and_labels_crf_file(str(write_tiny_grobid(tmp_path_factory.mktemp("d") / "date.train", n=24)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, data: tuple) -> Path:
    """A features model trained through the facade in DeLFT 1.2.0's argument order, saved DeLFT's way."""
    x, y, f = data
    model = Sequence("date-BidLSTM_CRF_FEATURES", architecture="BidLSTM_CRF_FEATURES", **TINY)
    model.train(x[:20], y[:20], f[:20], x[20:], y[20:], f[20:])
    assert model.model_config.features_indices == [1, 2, 3]  # the lower-cased token has too many values
    models = tmp_path_factory.mktemp("models")
    model.save(models)
    return models


def test_readers_give_delft_lists(data: tuple) -> None:
    x, y, f = data
    assert x[1] == ["May", "2", ",", "1991"] and y[1] == ["B-<month>", "B-<day>", "O", "B-<year>"]
    assert f[1][0] == ["may", "LINESTART", "INITCAP", "NOPUNCT"]
    tokens, features = load_data_crf_string("a\tA  x\nb B y\n \n\nc C z\n")
    assert tokens == [["a", "b"], ["c"]] and features == [[["A", "x"], ["B", "y"]], [["C", "z"]]]


def test_grobid_in_process_training_passes_validation_third_and_fourth(tmp_path: Path, data: tuple) -> None:
    x, y, _ = data
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("".join(f"{w} 0.1 0.2 0.3 0.4\n" for w in ("june", "may", "2005", ",")), encoding="utf-8")
    registry = tmp_path / "resources-registry.json"
    registry.write_text(json.dumps({"embeddings": [{"name": "glove-840B", "path": str(vectors)}]}), encoding="utf-8")
    # as DeLFTModel.TrainTask constructs it (with a registry naming glove-840B, and tiny sizes)
    model = Sequence("date", max_epoch=1, recurrent_dropout=0.50, embeddings_name="glove-840B", use_ELMo=False,
                     architecture="BidLSTM_CRF", resource_registry_path=str(registry),
                     word_lstm_units=8, char_lstm_units=4, char_emb_size=4)
    model.train(x[:20], y[:20], x[20:], y[20:])
    assert model.labeler.data_config.embeddings == str(vectors)
    pairs = model.tag(x[:2], None)
    assert [[token for token, _ in sequence] for sequence in pairs] == x[:2]
    with pytest.raises(ConfigError, match="the third argument holds tokens"):
        model.train(x[:20], y[:20], x[20:], y[20:], None, [[]])


def test_tag_follows_model_config_and_answers_json(trained: Path, data: tuple,
                                                   capsys: pytest.CaptureFixture) -> None:
    x, y, f = data
    model = Sequence("date-BidLSTM_CRF_FEATURES")
    model.load(dir_path=trained)
    whole = model.tag(x, None, features=f)
    model.model_config.max_sequence_length = 2  # tagged in pieces: still one label per token
    assert [len(s) for s in model.tag(x, None, features=f)] == [len(s) for s in whole]
    model.model_config.max_sequence_length = 3000
    model.model_config.batch_size = 1
    assert model.tag(x, None, features=f) == whole
    answer = model.tag(x[:1], "json", features=f[:1])
    assert answer["model"] == "date-BidLSTM_CRF_FEATURES" and answer["texts"][0]["text"] == "1 June 1990"
    with pytest.raises(ConfigError, match=r"reads feature columns \[1, 2, 3\]"):
        model.tag(x, None)
    with pytest.raises(DataError, match="column 3"):
        model.tag(x[:1], None, features=[[row[:2] for row in f[0]]])
    scores = model.eval(x, y, features=f)
    assert scores["n_sequences"] == 24 and 0.0 <= scores["f1"] <= 1.0
    assert "micro avg" in capsys.readouterr().out


def test_load_takes_the_models_folder_or_the_model_folder(trained: Path, tmp_path: Path) -> None:
    by_folder = Sequence("date-BidLSTM_CRF_FEATURES")
    by_folder.load(trained / "date-BidLSTM_CRF_FEATURES")
    assert by_folder.model_dir == trained / "date-BidLSTM_CRF_FEATURES"
    with pytest.raises(ModelFormatError, match="no model 'date-BidLSTM_CRF'"):
        Sequence("date-BidLSTM_CRF").load(dir_path=tmp_path)


def test_training_follows_delfts_rate_cut_and_random_batches() -> None:
    from textorch.tagging.delft.options import model_config_from, textorch_configs

    _, default, _ = textorch_configs(model_config_from("date", None, {}), None)
    assert (default.lr_decay, default.lr_decay_patience, default.bucket_batches) == (0.5, 2, 1)
    _, given, _ = textorch_configs(model_config_from("date", None, {"lr_decay": 0.7}), None)
    assert given.lr_decay == 0.7


def test_options_textorch_cannot_honour_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"Sequence\(optimizer=...\)"):
        Sequence("date", optimizer="sgd")
    with pytest.raises(ConfigError, match=r"use_ELMo"):
        Sequence("date", use_ELMo=True)
    with pytest.raises(TypeError, match="colour"):
        Sequence("date", colour="blue")
    legacy = Sequence("date", model_type="BidGRU_CRF", transformer=None, nb_workers=2, multiprocessing=False)
    assert legacy.model_config.architecture == "BidGRU_CRF"
    with pytest.raises(OSError, match="call load"):
        legacy.tag([["a"]], None)


def _fake_importer(monkeypatch: pytest.MonkeyPatch, trained: Path) -> list:
    """The importer's recognition and conversion replaced: 'converting' copies a textorch model,
    counting its calls, so that what the facade's load does around them is what is tested."""
    from textorch.tagging.delft_import import importer

    calls: list = []

    def convert(source: Path, target: Path, embeddings: object = None) -> Path:
        calls.append(Path(source))
        shutil.copytree(trained / "date-BidLSTM_CRF_FEATURES", target)
        return Path(target)

    monkeypatch.setattr(importer, "is_delft_model_dir", lambda path: (Path(path) / "model_weights.hdf5").is_file())
    monkeypatch.setattr(importer, "convert_delft_model", convert)
    return calls


def _delft_dir(root: Path) -> Path:
    folder = root / "models" / "date-BidLSTM_CRF"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_name": "date-BidLSTM_CRF", "architecture": "BidLSTM_CRF"}')
    (folder / "model_weights.hdf5").write_bytes(b"\x89HDF")
    return folder


def test_a_delft_model_is_converted_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         trained: Path) -> None:
    calls = _fake_importer(monkeypatch, trained)
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    source = _delft_dir(tmp_path)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in source.iterdir())
    for _ in range(2):
        model = Sequence("date-BidLSTM_CRF")
        model.load(dir_path=tmp_path / "models")
        assert model.labeler is not None
    assert calls == [source]
    assert sorted((p.name, p.stat().st_mtime_ns) for p in source.iterdir()) == before  # never written to
    assert [p.parent.name for p in (tmp_path / "cache").rglob("config.json")] != []


def test_grobid_tagger_arguments_become_textorch_grobid_ones(tmp_path: Path) -> None:
    models = tmp_path / "models"
    default = "BidLSTM_CRF_FEATURES_TEMPLATE"  # no --architecture (GROBID's grobid.yaml names none): textorch's GROBID default
    (models / f"date-{default}").mkdir(parents=True)
    assert textorch_arguments(["date", "train_eval", "--input", "d.train", "--output", str(models), "--max-epoch", "-1",
                               "--batch-size", "5", "--features-indices", "9-15", "--incremental",
                               "--input-model", str(models), "--fold-count", "3", "--early-stop", "false"]) == [
        "grobid", "date", "train-eval", "--architecture", default, "--output", str(models / f"date-{default}"),
        "--input", "d.train", "--batch-size", "5", "--fold-count", "3", "--early-stop", "false",
        "--feature-columns", "9-15", "--incremental", "--input-model", str(models / f"date-{default}")]
    assert textorch_arguments(["date", "eval", "--input", "d.test", "--architecture", "BidLSTM_CRF"])[5:7] == [
        "--output", "data/models/sequenceLabelling/grobid-date-BidLSTM_CRF"]
    with pytest.raises(ConfigError, match="--use-ELMo"):
        textorch_arguments(["date", "train", "--use-ELMo"])


def test_embedding_names_go_through_the_bridge_registry_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.tagging.delft.embeddings import resolve_embeddings_name

    vectors = tmp_path / "glove.txt"
    vectors.write_text("june 0.1 0.2\n", encoding="utf-8")
    package = tmp_path / "bridge" / "delft"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("# written by 'textorch grobid-bridge': a forwarding package\n")
    (package / "resources-registry.json").write_text(json.dumps(
        {"embeddings": [{"name": "glove-840B", "path": str(vectors)}, {"name": "fasttext-crawl", "path": "/no/such"}]}))
    assert resolve_embeddings_name("glove-840B") == "glove-840B"  # no bridge imported: textorch's registry decides
    bridge = type(sys)("delft")
    bridge.__file__ = str(package / "__init__.py")
    monkeypatch.setitem(sys.modules, "delft", bridge)
    assert resolve_embeddings_name("glove-840B") == str(vectors)
    assert resolve_embeddings_name("word2vec") == "word2vec" and resolve_embeddings_name(None) == "none"
    with pytest.raises(ConfigError, match="fasttext-crawl.*not found"):
        resolve_embeddings_name("fasttext-crawl")
    arguments = textorch_arguments(["date", "train", "--embedding", "glove-840B"], bridge_dir=package.parent)
    assert arguments[-2:] == ["--embeddings", str(vectors)]


def test_grobid_incremental_training_continues_a_model_trained_from_a_file(tmp_path: Path, data: tuple) -> None:
    from textorch.cli.main import main

    models = tmp_path / "models"
    assert main(["grobid", "date", "train", "--input", str(write_tiny_grobid(tmp_path / "date.train", n=16)),
                 "--output", str(models / "date-BidLSTM_CRF"), "--architecture", "BidLSTM_CRF", "--max-epoch", "1",
                 "--early-stop", "false"]) == 0
    x, y, _ = data
    # DeLFTModel.TrainTask with incremental: load the models folder, train in 0.x order, save
    model = Sequence("date-BidLSTM_CRF", max_epoch=1, recurrent_dropout=0.50, use_ELMo=False, architecture="BidLSTM_CRF")
    model.load(str(models))
    model.train(x[:20], y[:20], x[20:], y[20:], incremental=True)
    model.save(str(models))
    assert len(json.loads((models / "date-BidLSTM_CRF" / "history.json").read_text())["runs"]) == 2


def test_grobids_default_trained_by_the_bridge_tags_through_the_facade(tmp_path: Path, data: tuple) -> None:
    """GROBID's training subprocess without an architecture trains textorch's GROBID default;
    GROBID's label task then hands that model its features (its name holds FEATURE), and the
    facade's labels are those of `textorch grobid MODEL tag`."""
    from textorch.cli.main import main

    train = write_tiny_grobid(tmp_path / "date.train", n=24)
    models = tmp_path / "models"
    arguments = textorch_arguments(["date", "train", "--input", str(train), "--output", str(models), "--max-epoch", "2"])
    assert main(arguments) == 0
    name = f"date-{GROBID_DEFAULT_ARCHITECTURE}"
    model = Sequence(name)
    model.load(dir_path=models)
    x, _, f = data
    labels = [[label for _, label in sequence] for sequence in model.tag(x, None, features=f)]
    expected = SequenceLabeler.load(models / name).predict(read_labelled(train).sequences)
    assert labels == [p.labels for p in expected]


# ------------------------------------------------ None or the wrong type at the call (issue #52)
def test_none_or_a_wrong_type_is_refused_at_the_call_naming_the_argument(trained: Path, data: tuple) -> None:
    """Each was a ``TypeError``/``AttributeError`` from deep inside (``len(None)``,
    ``None.splitlines``, ``Path(None)``), a ``ValueError`` only at the first ``tag`` after
    ``batch_size='abc'``, or, for bytes tokens, no error at all: ``b'June'`` tagged as the text
    ``"b'June'"``. Now a ``TextorchError`` at the call, naming the argument."""
    from textorch.tagging.delft.reader import load_data_and_labels_crf_string

    x, y, f = data
    model = Sequence("date-BidLSTM_CRF_FEATURES")
    with pytest.raises(ConfigError, match=r"^Sequence.load\(dir_path=None\): expected the models' folder"):
        model.load(None)
    model.load(trained)
    tokens = x[0]
    with pytest.raises(DataError, match=r"^features\[0\]: expected a list of per-token feature lists, got NoneType"):
        model.tag([tokens], None, features=[None])
    with pytest.raises(DataError, match=r"^features\[0\]\[0\]: expected a list of feature values, got NoneType"):
        model.tag([tokens], None, features=[[None] * len(tokens)])
    with pytest.raises(DataError, match=r"^features: expected a list of feature sequences, got int"):
        model.tag([tokens], None, features=5)
    with pytest.raises(DataError, match=r"^texts\[0\]\[0\]: a token must be a str, got bytes b'June' \(decode it first\)"):
        model.tag([[b"June"] + tokens[1:]], None, features=[f[0]])
    with pytest.raises(ConfigError, match=r"^batch_size='abc': expected a whole number"):
        model.tag([tokens], None, features=[f[0]], batch_size="abc")
    with pytest.raises(ConfigError, match=r"^batch_size='abc': expected a whole number"):
        Sequence("date", batch_size="abc")
    with pytest.raises(ConfigError, match=r"^max_sequence_length='x': expected a whole number"):
        model.model_config.max_sequence_length = "x"
    assert model.tag([tokens], None, features=[f[0]])  # the refused values left the model as it was
    with pytest.raises(DataError, match=r"^x_train: expected a list of token sequences, got NoneType"):
        Sequence("date", max_epoch=1).train(None, None)
    with pytest.raises(DataError, match=r"^x_train\[0\]\[0\]: a token must be a str, got bytes"):
        Sequence("date", max_epoch=1).train([[b"June"]], [["O"]])
    for reader in (load_data_crf_string, load_data_and_labels_crf_string):
        with pytest.raises(DataError, match=r"^crf_string: expected the GROBID feature lines as a str, got NoneType"):
            reader(None)
    with pytest.raises(DataError, match=r"^filepath: expected a file path"):
        load_data_and_labels_crf_file(None)
