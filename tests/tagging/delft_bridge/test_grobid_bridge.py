"""GROBID's own use of DeLFT, replayed against a bridge directory in fresh Python processes.

The statements are those GROBID's ``DeLFTModel.java`` and ``JEPThreadPool.java`` evaluate
(through JEP) or run (training subprocess), with the bridge directory as ``delft.install``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import textorch
from tests.conftest import write_tiny_grobid
from textorch.cli.main import main
from textorch.data.tags import iob2_to_grobid

pytestmark = pytest.mark.processes  # see tests/conftest.py: scheduled first

TEXTORCH_ROOT = str(Path(textorch.__file__).resolve().parents[1])
"""The processes GROBID would start import the textorch under test, wherever it is installed."""

# What JEPThreadPool evaluates once per interpreter (numpy/sklearn are GROBID's own imports:
# only where installed), then what DeLFTModel evaluates per model and per call.
GROBID_SESSION = '''
import importlib.util, json, os, sys
os.chdir({bridge!r})
from delft.utilities.Embeddings import Embeddings
import delft.sequenceLabelling
from delft.sequenceLabelling import Sequence
from delft.sequenceLabelling.reader import load_data_and_labels_crf_file
from delft.sequenceLabelling.reader import load_data_crf_string
if importlib.util.find_spec("numpy") and importlib.util.find_spec("sklearn"):
    import numpy as np
    from sklearn.model_selection import train_test_split
assert "keras" not in sys.modules and "tensorflow" not in sys.modules
date = Sequence('date-BidLSTM_CRF_FEATURES')
date.load(dir_path={models!r})
date.model_config.max_sequence_length = 3000
date.model_config.batch_size = 20
name_header = Sequence('name-header-BidLSTM_CRF')
name_header.load(dir_path={models!r})
name_header.model_config.max_sequence_length = 3000
name_header.model_config.batch_size = 20
input = open({data!r}, encoding="utf-8").read()
x_all, f_all = load_data_crf_string(input)
with_features = date.tag(x_all, None, features=f_all)
without = name_header.tag(x_all, None)
del input
del x_all
del f_all
del date
del name_header
print(json.dumps({{"features": with_features, "plain": without}}))
'''


def _unlabelled(source: Path, target: Path) -> Path:
    """The token lines without their label, as GROBID sends them to tag (sequences kept apart)."""
    lines = [" ".join(line.split()[:-1]) if line.strip() else line for line in source.read_text().splitlines()]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def _python(arguments: list[str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, *arguments], cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([TEXTORCH_ROOT, os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _textorch_tag(model: Path, data: Path, out: Path) -> list[list[str]]:
    assert main(["grobid", "date", "tag", "--input", str(data), "--output", str(model), "--tag-output", str(out)]) == 0
    return [record["labels"] for record in json.loads(out.read_text())["texts"]]


@pytest.mark.skipif(importlib.util.find_spec("delft") is not None, reason="a real DeLFT is installed here")
def test_grobid_trains_loads_and_tags_through_the_bridge(tmp_path: Path) -> None:
    bridge, models = tmp_path / "delft-install", tmp_path / "grobid-home" / "models"
    assert main(["grobid-bridge", str(bridge)]) == 0
    assert importlib.util.find_spec("delft") is None  # only inside the bridge directory
    train = write_tiny_grobid(tmp_path / "date.train", n=30)
    common = ["--input", str(train), "--output", str(models), "--max-epoch", "1", "--batch-size", "-1"]
    # DeLFTModel.train: the script in delft/applications; older GROBID: grobidTagger.py at the root
    _python(["delft/applications/grobidTagger.py", "date", "train", *common, "--architecture", "BidLSTM_CRF_FEATURES"],
            bridge)
    _python(["grobidTagger.py", "name-header", "train", *common, "--architecture", "BidLSTM_CRF"], bridge)
    assert sorted(p.name for p in models.iterdir()) == ["date-BidLSTM_CRF_FEATURES", "name-header-BidLSTM_CRF"]

    data = _unlabelled(train, tmp_path / "input.txt")
    session = GROBID_SESSION.format(bridge=str(bridge), models=str(models), data=str(data))
    answer = json.loads(_python(["-c", f"import sys; sys.path.insert(0, {str(bridge)!r})\n{session}"], bridge))

    lines = [line.split()[0] for line in data.read_text().splitlines() if line.strip()]
    for key, model in (("features", "date-BidLSTM_CRF_FEATURES"), ("plain", "name-header-BidLSTM_CRF")):
        pairs = answer[key]
        assert [token for sequence in pairs for token, _ in sequence] == lines  # one label per input line
        assert {label for sequence in pairs for _, label in sequence} <= {"O", *(f"{p}-<{x}>" for p in "BI" for x in
                                                                                 ("month", "day", "year"))}
        expected = _textorch_tag(models / model, data, tmp_path / f"{key}.json")
        assert [iob2_to_grobid([label for _, label in sequence]) for sequence in pairs] == expected


def test_a_bridge_onto_a_read_only_place_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``grobid-bridge DIR`` where DIR is on a read-only file system (``EROFS``, simulated: root
    writes through file modes): one line naming the file, exit 2. Before, a traceback."""
    import errno

    bridge = tmp_path / "bridge"
    real_mkdir = Path.mkdir

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        if self == bridge or bridge in self.parents:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["grobid-bridge", str(bridge)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith(f"textorch: error: {bridge}/"), err
    assert err.strip().endswith(": cannot write the bridge (Read-only file system)") and len(err.splitlines()) == 1, err
