"""What a GROBID user switching from DeLFT meets (issue 39, items 1-5), on the DeLFT 1.2.0 fixtures.

The bridge is imported as GROBID imports it (its directory on the path, ``from delft...``), in
this process; the JVM itself is exercised elsewhere.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import textorch
from tests.conftest import write_tiny_grobid
from textorch.cli.main import main
from textorch.data.tags import iob2_to_grobid
from textorch.errors import ConfigError
from textorch.tagging.delft.bridge import write_bridge
from textorch.tagging.labeler import SequenceLabeler

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "delft_import"))
from test_importer import EXPECTED, FIXTURES, delft_dir  # noqa: E402

TEXTORCH_ROOT = str(Path(textorch.__file__).resolve().parents[1])
NAME = json.loads((FIXTURES / "BidLSTM_CRF" / "config.json").read_text())["embeddings_name"]
LABELS = EXPECTED["labels"]["BidLSTM_CRF"]
KEPT = [i for i, labels in enumerate(LABELS) if "<PAD>" not in labels]
"""The fixture's sequences less the one where this random model predicts DeLFT's padding label."""


def grobid_lines(gold: bool) -> str:
    """The kept sequences as GROBID lines: 16 feature columns no BidLSTM_CRF reads, maybe a gold label."""
    lines = []
    for tokens in [EXPECTED["tokens"][i] for i in KEPT]:
        lines += [" ".join([token, *[f"f{i}" for i in range(16)], *(["<date>"] if gold else [])]) for token in tokens]
        lines.append("")
    return "\n".join(lines) + "\n"


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Caches and textorch's registry inside tmp_path, whatever the user has set."""
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TEXTORCH_EMBEDDINGS_REGISTRY", raising=False)
    return tmp_path


@pytest.fixture
def bridge(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A bridge directory, imported as GROBID imports it; the DeLFT model in its ``models/``."""
    root = isolated / "bridge"
    write_bridge(root)
    models = root / "models"
    models.mkdir()
    delft_dir(models, "BidLSTM_CRF").rename(models / "date-BidLSTM_CRF")
    for name in [m for m in sys.modules if m == "delft" or m.startswith("delft.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m == "delft" or m.startswith("delft.")]:
        del sys.modules[name]


def grobid_sequence(name: str = "date-BidLSTM_CRF"):
    from delft.sequenceLabelling import Sequence  # the bridge's, as GROBID imports it

    return Sequence(name)


def test_the_users_delft_registry_in_the_bridge_serves_a_delft_model(bridge: Path) -> None:
    shutil.copy(FIXTURES / "vectors.txt", bridge / "vectors.txt")
    # a relative path, as DeLFT's own registry has them: from the folder holding delft/
    (bridge / "delft" / "resources-registry.json").write_text(json.dumps(
        {"embeddings": [{"name": NAME, "path": "vectors.txt", "type": "glove", "format": "vec", "lang": "en"}]}))
    model = grobid_sequence()
    model.load(dir_path=bridge / "models")
    assert [[label for _, label in pairs] for pairs in model.tag(EXPECTED["tokens"], None)] == LABELS
    assert Path(model.labeler.embeddings.path) == (bridge / "vectors.txt").resolve()
    from delft.utilities.Embeddings import Embeddings
    from textorch.embeddings import resolve_spec

    assert Path(Embeddings(NAME).spec) == resolve_spec(NAME).path == (bridge / "vectors.txt").resolve()


def test_a_real_delft_beside_textorch_keeps_its_registry(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = isolated / "site" / "delft"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""DeLFT itself."""\n')
    (package / "resources-registry.json").write_text(json.dumps(
        {"embeddings": [{"name": NAME, "path": str(FIXTURES / "vectors.txt")}]}))
    real = type(sys)("delft")
    real.__file__ = str(package / "__init__.py")
    monkeypatch.setitem(sys.modules, "delft", real)
    from textorch.embeddings import resolve_spec

    with pytest.raises(ConfigError, match="no registry found"):
        resolve_spec(NAME)


def test_a_failed_load_says_what_to_write_where_and_later_calls_repeat_it(
        isolated: Path, bridge: Path, caplog: pytest.LogCaptureFixture) -> None:
    registry = bridge / "delft" / "resources-registry.json"
    model = grobid_sequence()
    with caplog.at_level(logging.ERROR, logger="textorch"), pytest.raises(ConfigError) as failed:
        model.load(dir_path=bridge / "models")
    cause = str(failed.value)
    assert f"DeLFT model {bridge / 'models' / 'date-BidLSTM_CRF'}: embeddings {NAME!r} are in no registry" in cause
    assert json.dumps({"name": NAME, "path": "/path/to/vectors.txt"}) in cause
    assert f"DeLFT registry {registry} (no such file yet)" in cause
    assert f"textorch's registry {isolated}/home/.config/textorch/embeddings.json" in cause
    assert "--embeddings" not in cause  # no command line inside GROBID
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"load() of 'date-BidLSTM_CRF' failed: {cause}"]  # once, since GROBID drops the exception
    for _ in range(2):
        with pytest.raises(OSError) as later:
            model.tag([["June", "1990"]], None)
        assert str(later.value) == (f"Could not find a model: call load() or train() on 'date-BidLSTM_CRF' first "
                                    f"(load() failed: {cause})")
    registry.write_text(json.dumps({"embeddings": [{"name": "glove-840B", "path": str(FIXTURES / "vectors.txt")}]}))
    with pytest.raises(ConfigError, match=r"resources-registry.json \(which does not list it\)"):
        model.load(dir_path=bridge / "models")


def test_outside_grobid_the_error_names_what_the_commands_take(isolated: Path, capsys: pytest.CaptureFixture) -> None:
    source = delft_dir(isolated, "BidLSTM_CRF")
    (isolated / "in.txt").write_text("June 1990\n", encoding="utf-8")
    assert main(["seq", "tag", "--model", str(source), "--input", str(isolated / "in.txt"),
                 "--input-format", "text"]) == 2
    err = capsys.readouterr().err
    assert f"DeLFT model {source} uses the word embeddings {NAME!r}: unknown embeddings" in err
    assert f"textorch import-delft {source} OUT --embeddings PATH" in err  # seq tag itself has no --embeddings
    with pytest.raises(ConfigError, match=r"^unknown embeddings 'glove-6B'"):  # a name given: its own error
        SequenceLabeler.load(source, embeddings="glove-6B")


def test_a_name_pointed_at_other_vectors_is_converted_again(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = delft_dir(isolated, "BidLSTM_CRF")
    other = isolated / "other-vectors.txt"
    rows = [line.split(" ") for line in (FIXTURES / "vectors.txt").read_text(encoding="utf-8").splitlines()]
    other.write_text("".join(" ".join([w, *reversed(vs)]) + "\n" for w, *vs in rows), encoding="utf-8")
    registry = isolated / "registry.json"
    monkeypatch.setenv("TEXTORCH_EMBEDDINGS_REGISTRY", str(registry))
    found = []
    for vectors in (FIXTURES / "vectors.txt", other, FIXTURES / "vectors.txt"):
        registry.write_text(json.dumps({"embeddings": [{"name": NAME, "path": str(vectors)}]}))
        labeler = SequenceLabeler.load(source)
        found.append((Path(labeler.embeddings.path), sorted((isolated / "cache" / "delft-imports").iterdir())))
    assert [path for path, _ in found] == [(FIXTURES / "vectors.txt").resolve(), other.resolve(),
                                           (FIXTURES / "vectors.txt").resolve()]
    assert [len(folders) for _, folders in found] == [1, 2, 2]  # the first conversion is reused at the end
    assert (isolated / "cache" / "embeddings").is_dir()  # one cache root for both kinds


def test_grobid_tag_reads_grobid_lines_for_an_imported_bidlstm_crf(isolated: Path) -> None:
    out = isolated / "date-BidLSTM_CRF"
    assert main(["import-delft", str(delft_dir(isolated, "BidLSTM_CRF")), str(out),
                 "--embeddings", str(FIXTURES / "vectors.txt")]) == 0
    data, answer = isolated / "input.grobid", isolated / "answer.json"
    for gold in (True, False):
        data.write_text(grobid_lines(gold), encoding="utf-8")
        assert main(["grobid", "date", "tag", "--output", str(out), "--input", str(data),
                     "--tag-output", str(answer)]) == 0
        texts = json.loads(answer.read_text())["texts"]
        assert [t["labels"] for t in texts] == [iob2_to_grobid(LABELS[i]) for i in KEPT]  # GROBID's style


@pytest.mark.processes
def test_grobid_tagger_in_the_bridge_reads_the_users_registry(bridge: Path) -> None:
    """GROBID's training subprocess, on a DeLFT-made model: the same rule as in JEP."""
    (bridge / "delft" / "resources-registry.json").write_text(json.dumps(
        {"embeddings": [{"name": NAME, "path": str(FIXTURES / "vectors.txt")}]}))
    (bridge / "input.grobid").write_text(grobid_lines(gold=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TEXTORCH_ROOT, os.environ.get("PYTHONPATH", "")])}
    # the architecture grobid.yaml names (without one the bridge would look for textorch's default)
    done = subprocess.run([sys.executable, "delft/applications/grobidTagger.py", "date", "tag", "--input", "input.grobid",
                           "--architecture", "BidLSTM_CRF", "--output", "models"], cwd=bridge, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [t["labels"] for t in json.loads(done.stdout)["texts"]] == [iob2_to_grobid(LABELS[i]) for i in KEPT]


def test_facade_training_shows_its_epochs_where_nothing_set_logging_up(
        isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from textorch.tagging.delft.facade import Sequence
    from textorch.tagging.delft.reader import load_data_and_labels_crf_file

    package = logging.getLogger("textorch")
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # an embedded interpreter: nothing set up
    monkeypatch.setattr(package, "handlers", [])
    monkeypatch.setattr(package, "level", logging.NOTSET)
    x, y, _ = load_data_and_labels_crf_file(str(write_tiny_grobid(isolated / "date.train", n=12)))
    model = Sequence("date", max_epoch=2, word_lstm_units=4, char_lstm_units=2, char_emb_size=2, batch_size=6)
    model.train(x[:10], y[:10], x[10:], y[10:])
    err = capsys.readouterr().err
    assert "epoch 1/2" in err and "epoch 2/2" in err
    assert package.handlers == [] and package.level == logging.NOTSET  # nothing left behind


@pytest.mark.processes
def test_a_python_that_cannot_see_textorch_is_told_why_at_the_bridge(isolated: Path) -> None:
    """GROBID's interpreter runs no .pth hook, so an editable install is not seen: the bridge says so."""
    write_bridge(isolated / "bridge")
    done = subprocess.run([sys.executable, "-S", "-E", "-c", "import delft"], cwd=isolated / "bridge",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert ("ImportError: this Python cannot import textorch (No module named 'textorch'); inside GROBID an "
            "editable install (pip install -e) is invisible") in done.stderr
