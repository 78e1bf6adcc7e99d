"""The model directory format: an old model keeps loading and tagging the same; damage is named.

``tests/fixtures/model-v1-bilstm-crf`` was written by textorch 0.1.0 (see make_fixture.py); its
weights are kept as text and rebuilt byte for byte into a model directory (model_fixture.py).
Every later version must load it and predict exactly what that release predicted. The damage
tests work on a copy of it and expect a ModelFormatError that names the damaged file (missing
files are covered in test_model_dir.py, a flipped weight byte in test_labeler.py).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from textorch.cli.main import main
from textorch.data.readers import read_grobid
from textorch.data.tags import iob2_to_grobid
from textorch.errors import ModelFormatError, TextorchError
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler
from textorch.model_dir import CONFIG_FILE, FORMAT_VERSION, VOCAB_FILE, WEIGHTS_FILE

from model_fixture import SOURCE, TEXT_WEIGHTS, v1_model_dir

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPECTED = json.loads((FIXTURES / "expected-tagging.json").read_text(encoding="utf-8"))
TO_TAG = FIXTURES / EXPECTED["input"]


@pytest.fixture(scope="module")
def v1_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 0.1.0 directory, rebuilt (read-only for the tests: damage goes to ``model_copy``)."""
    return v1_model_dir(tmp_path_factory.mktemp("v1") / "model-v1-bilstm-crf")


def test_fixture_is_a_complete_format_1_directory(v1_model: Path) -> None:
    assert sorted(p.name for p in SOURCE.iterdir()) == [CONFIG_FILE, VOCAB_FILE, TEXT_WEIGHTS]
    assert sorted(p.name for p in v1_model.iterdir()) == [CONFIG_FILE, WEIGHTS_FILE, VOCAB_FILE]
    config = json.loads((v1_model / CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["format_version"] == 1 <= FORMAT_VERSION
    assert config["weights_sha256"] == hashlib.sha256((v1_model / WEIGHTS_FILE).read_bytes()).hexdigest()
    assert sum(p.stat().st_size for p in v1_model.iterdir()) < 20_000


def test_fixture_loads_and_tags_as_the_release_that_made_it(v1_model: Path) -> None:
    labeler = SequenceLabeler.load(v1_model)
    assert labeler.model_config.architecture == "BidLSTM_CRF_FEATURES"
    assert labeler.input_format == "grobid" and labeler.n_features == 5
    corpus = read_grobid(TO_TAG, labelled=False, n_features=labeler.n_features)
    predictions = labeler.predict(corpus.sequences)
    assert [p.labels for p in predictions] == EXPECTED["labels"]
    for got, expected in zip(predictions, EXPECTED["scores"]):
        assert got.scores == pytest.approx(expected, abs=1e-5)


def test_fixture_tags_identically_through_the_cli(v1_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "tagged.grobid"
    code = main(["seq", "tag", "--model", str(v1_model), "--input", str(TO_TAG), "--input-format", "grobid",
                 "--output", str(out)])
    assert code == 0
    blocks = [block.splitlines() for block in out.read_text(encoding="utf-8").strip().split("\n\n")]
    assert [[line.split()[-1] for line in block] for block in blocks] == [
        iob2_to_grobid(labels) for labels in EXPECTED["labels"]
    ]


@pytest.fixture
def model_copy(v1_model: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(v1_model, tmp_path / "model"))


def _load_error(directory: Path) -> str:
    with pytest.raises(ModelFormatError) as info:
        SequenceLabeler.load(directory)
    return str(info.value)


@pytest.mark.parametrize("keep", [0, 100, 12_000])
def test_truncated_weights_are_named(model_copy: Path, keep: int) -> None:
    weights = model_copy / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:keep])
    message = _load_error(model_copy)
    assert str(weights) in message and "checksum does not match" in message


def test_truncated_weights_without_checksum_are_still_refused(model_copy: Path) -> None:
    """A directory whose config lost its checksum still cannot load half a weights file."""
    config = json.loads((model_copy / CONFIG_FILE).read_text())
    del config["weights_sha256"]
    (model_copy / CONFIG_FILE).write_text(json.dumps(config))
    weights = model_copy / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:5000])
    message = _load_error(model_copy)
    assert str(weights) in message and "cannot read weights" in message


def test_weights_swapped_for_another_model_are_refused(model_copy: Path, tmp_path: Path) -> None:
    """A valid safetensors file of the right shapes but other values fails the checksum."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(model_copy / WEIGHTS_FILE))
    name = next(iter(state))
    state[name] = state[name] + 0.5
    save_file(state, str(model_copy / WEIGHTS_FILE))
    assert str(model_copy / WEIGHTS_FILE) in _load_error(model_copy)


@pytest.mark.parametrize("name", [CONFIG_FILE, VOCAB_FILE])
def test_truncated_json_is_named(model_copy: Path, name: str) -> None:
    path = model_copy / name
    path.write_bytes(path.read_bytes()[:40])
    message = _load_error(model_copy)
    assert message.startswith(f"{path}: not valid JSON")


def test_config_that_is_not_an_object_is_named(model_copy: Path) -> None:
    (model_copy / CONFIG_FILE).write_text("[1, 2]")
    assert _load_error(model_copy) == f"{model_copy / CONFIG_FILE}: not a JSON object; not a textorch model config"


def test_newer_format_names_the_file_and_both_versions(model_copy: Path) -> None:
    config = json.loads((model_copy / CONFIG_FILE).read_text())
    config["format_version"] = FORMAT_VERSION + 1
    (model_copy / CONFIG_FILE).write_text(json.dumps(config))
    message = _load_error(model_copy)
    assert message.startswith(f"{model_copy / CONFIG_FILE}: model format version {FORMAT_VERSION + 1} is newer")
    assert f"supports ({FORMAT_VERSION})" in message


def test_config_without_format_version_is_refused(model_copy: Path) -> None:
    config = json.loads((model_copy / CONFIG_FILE).read_text())
    del config["format_version"]
    (model_copy / CONFIG_FILE).write_text(json.dumps(config))
    assert "no format_version" in _load_error(model_copy)


def test_config_that_does_not_fit_the_weights_is_named(model_copy: Path) -> None:
    config = json.loads((model_copy / CONFIG_FILE).read_text())
    config["model"]["word_hidden"] = 16
    (model_copy / CONFIG_FILE).write_text(json.dumps(config))
    message = _load_error(model_copy)
    assert WEIGHTS_FILE in message and "do not fit the config" in message


def test_unknown_architecture_from_a_newer_release_is_a_clear_error(model_copy: Path) -> None:
    config = json.loads((model_copy / CONFIG_FILE).read_text())
    config["model"]["architecture"] = "FutureNet"
    (model_copy / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(TextorchError, match="FutureNet"):
        SequenceLabeler.load(model_copy)


def test_not_a_directory(tmp_path: Path) -> None:
    assert "not a model directory" in _load_error(tmp_path / "absent")


def test_unwritable_output_fails_before_any_training(tiny_grobid: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    """Tests run as root, where permissions do not stop writes: a regular file on the path does."""
    blocker = tmp_path / "results.txt"
    blocker.write_text("not a directory\n")
    blocker.chmod(0o755)  # executable too: root's access(W_OK | X_OK) then says yes
    calls = []
    monkeypatch.setattr(SequenceLabeler, "build", lambda *a, **k: calls.append("build"))
    monkeypatch.setattr(SequenceLabeler, "fit", lambda *a, **k: calls.append("fit"))
    code = main(["seq", "train", "--train", str(tiny_grobid), "--output", str(blocker / "model"), "--max-epoch", "1"])
    assert code == 2 and calls == []
    err = capsys.readouterr().err
    assert f"{blocker / 'model'}: cannot write the model here ({blocker} is a file, not a directory)" in err
    assert blocker.read_text() == "not a directory\n"


class _Stop(Exception):
    """Raised where training would start: the checks before it are what is counted."""


@pytest.mark.parametrize("door", ["seq files", "seq corpora", "cls files", "cls corpora"])
def test_the_output_is_checked_once_per_training_call(door: str, tiny_grobid: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Every door (files or corpora, either task) probes the output once, before training."""
    import textorch.train.run as run  # the run of both tasks, where the output is checked
    from textorch.classification.classifier import ClsDataConfig, TextClassifier
    from textorch.classification.training import train_text_classifier
    from textorch.classification.classify_files import read_labelled as read_texts
    from textorch.data.readers import read_labelled
    from tiny_classification import write_tiny_csv

    probed: list[str] = []
    monkeypatch.setattr(run, "check_writable", lambda output: probed.append(str(output)))
    for task in (SequenceLabeler, TextClassifier):
        monkeypatch.setattr(task, "build", lambda *a, **k: (_ for _ in ()).throw(_Stop()))
    output = tmp_path / "model"
    task, data = door.split()
    if task == "seq":
        train = tiny_grobid if data == "files" else read_labelled(tiny_grobid)
        with pytest.raises(_Stop):
            train_sequence_labeler(train, output=output, max_epoch=1)
    else:
        texts = write_tiny_csv(tmp_path / "tiny.csv")
        train = texts if data == "files" else read_texts(str(texts), ClsDataConfig())
        with pytest.raises(_Stop):
            train_text_classifier(train, output=output, max_epoch=1)
    assert probed == [str(output)]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc, a pseudo file system")
@pytest.mark.parametrize("command", ["seq", "cls"])
def test_output_on_a_pseudo_file_system_fails_before_any_training(
        command: str, tiny_grobid: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """``os.access`` says /proc is writable (to root); creating a directory there fails. The probe
    must find that before training, not the first checkpoint after a whole epoch."""
    from textorch.classification.classifier import TextClassifier
    from tiny_classification import write_tiny_csv

    calls = []
    for trainer in (SequenceLabeler, TextClassifier):
        monkeypatch.setattr(trainer, "build", lambda *a, **k: calls.append("build"))
    data = tiny_grobid if command == "seq" else write_tiny_csv(tmp_path / "tiny.csv")
    output = f"/proc/textorch-test-{command}-x"
    assert main([command, "train", "--train", str(data), "--output", output, "--max-epoch", "1"]) == 2
    assert calls == []
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(
        f"textorch: error: {output}: cannot write the model here (creating a directory in /proc fails: "), errors
    assert not Path(output).exists()


def test_the_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    """The output's parent is probed, and the output itself when it exists (checkpoints go there)."""
    from textorch.model_dir import check_writable

    check_writable(tmp_path / "new" / "model")
    (tmp_path / "old").mkdir()
    check_writable(tmp_path / "old")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["old"]
