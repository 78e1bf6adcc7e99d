"""GROBID's calls into DeLFT made from a real JVM, through JEP, against ``textorch grobid-bridge``.

``GrobidCalls.java`` (written here, see its header) makes them as GROBID's ``DeLFTModel`` and
``JEPThreadPool`` do: one ``SharedInterpreter`` on the single thread of a one-thread executor,
the bridge on its path and ``os.chdir`` into it, ``Sequence(...)``, ``load``, ``model_config``,
``tag(x_all, None[, features=f_all])`` per ``label`` call from several Java threads, and training
as ``python3 delft/applications/grobidTagger.py MODEL train ...`` started in the bridge.

The JVM runs once for the module; each test reads the part it checks. Needs a JDK and JEP built
against it (tests/jvm/jvm_tools.py builds JEP into a cache, never into the project's
environment); skipped with the reason otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import textorch
from tests.conftest import write_tiny_grobid
from tests.jvm import jvm_tools
from textorch.cli.main import main
from textorch.data.tags import iob2_to_grobid

pytestmark = pytest.mark.processes  # see tests/conftest.py: scheduled first

HERE = Path(__file__).resolve().parent
TEXTORCH_ROOT = str(Path(textorch.__file__).resolve().parents[1])
"""The textorch under test, put on the embedded interpreter's path (an editable install's
``.pth`` hook never runs there) and on the training process's ``PYTHONPATH``."""
DELFT_FIXTURES = HERE.parent / "fixtures" / "delft-1.2"
"""Models made by DeLFT 1.2.0, kept as text (tests/tagging/delft_import/make_delft_fixtures.py)."""

THREADS, CALLS = 4, 3
TRAINED = ("date", "BidLSTM_CRF_FEATURES")
"""Trained here by ``textorch grobid date train``, then labelled from Java."""
FROM_GROBID_TAGGER = ("name-header", "BidLSTM_CRF")
"""Trained from Java by the grobidTagger.py process GROBID's ``DeLFTModel.train`` starts."""
DELFT_MADE = ("date", "BidLSTM_CRF")
"""A model DeLFT made (its fixture), found as GROBID's shipped ``date-BidLSTM_CRF``."""


@dataclass
class JvmRun:
    """One JVM run's files: ``out/STEP/`` per step, and the JVM's output."""

    out: Path
    log: str
    documents: dict[tuple[str, str], Path]

    def step(self, number: int) -> Path:
        folder = self.out / str(number)
        error = folder / "error.txt"
        assert not error.exists(), f"step {number} failed in the JVM:\n{error.read_text()}\n--- JVM output:\n{self.log[-4000:]}"
        return folder


def _document_files(sequences: list[list[str]], folder: Path, count: int) -> Path:
    """``doc-D.txt`` files: the sequences (GROBID lines without labels) in ``count`` consecutive
    chunks, each chunk one document as GROBID sends it to ``label``."""
    folder.mkdir(parents=True)
    size = -(-len(sequences) // count)
    for d in range(count):
        chunk = sequences[d * size:(d + 1) * size]
        (folder / f"doc-{d}.txt").write_text("\n\n".join("\n".join(s) for s in chunk) + "\n", encoding="utf-8")
    return folder


def _unlabelled_sequences(path: Path) -> list[list[str]]:
    sequences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            current.append(" ".join(line.split()[:-1]))
        elif current:
            sequences.append(current)
            current = []
    return sequences + ([current] if current else [])


def _delft_made_model(models: Path) -> list[list[str]]:
    """The DeLFT fixture as ``models/date-BidLSTM_CRF`` (DeLFT's files, its weights rebuilt), and
    its tagging input as GROBID lines."""
    from safetensors.numpy import save_file

    target = models / "-".join(DELFT_MADE)
    target.mkdir(parents=True)
    for name in ("config.json", "preprocessor.json"):
        shutil.copy(DELFT_FIXTURES / DELFT_MADE[1] / name, target / name)
    weights = json.loads((DELFT_FIXTURES / DELFT_MADE[1] / "weights.json").read_text(encoding="utf-8"))
    save_file({name: np.asarray(t["values"], dtype=np.float32).reshape(t["shape"]) for name, t in weights.items()},
              str(target / "model.safetensors"))
    expected = json.loads((DELFT_FIXTURES / "expected.json").read_text(encoding="utf-8"))
    lines = [[" ".join([token, *row]) for token, row in zip(tokens, rows)]
             for tokens, rows in zip(expected["tokens"], expected["features"])]
    return lines


@pytest.fixture(scope="module")
def jvm_run(tmp_path_factory: pytest.TempPathFactory):
    """The JVM's run, textorch's cache (DeLFT model conversions) kept in the module's folder,
    for the JVM's processes and for this one's training and tagging."""
    with pytest.MonkeyPatch.context() as env:
        root = tmp_path_factory.mktemp("jvm")
        env.setenv("TEXTORCH_CACHE_DIR", str(root / "cache"))
        yield _run_jvm(root)


def _run_jvm(root: Path) -> JvmRun:
    try:
        found, _ = jvm_tools.jvm(build=True)
    except jvm_tools.Unavailable as exc:
        pytest.skip(f"JVM test: {exc}")
    if importlib.util.find_spec("delft") is not None:
        pytest.skip("a real DeLFT is importable here: the bridge's delft package would not be the one imported")
    classes = root / "classes"
    subprocess.run([str(found.javac), "-cp", str(found.jar), "-d", str(classes), str(HERE / "GrobidCalls.java")],
                   check=True, capture_output=True, timeout=120)

    bridge, models = root / "delft-install", root / "grobid-home" / "models"
    assert main(["grobid-bridge", str(bridge)]) == 0
    train = write_tiny_grobid(root / "date.train", n=30)
    model, architecture = TRAINED
    assert main(["grobid", model, "train", "--input", str(train), "--output", str(models / f"{model}-{architecture}"),
                 "--architecture", architecture, "--max-epoch", "5"]) == 0

    delft_lines = _delft_made_model(models)
    vectors = shutil.copy(DELFT_FIXTURES / "vectors.txt", root / "vectors-6d.txt")
    delft_config = json.loads((DELFT_FIXTURES / DELFT_MADE[1] / "config.json").read_text(encoding="utf-8"))
    # the user's DeLFT registry, copied into the bridge as docs/grobid.md says
    (bridge / "delft" / "resources-registry.json").write_text(json.dumps({"embeddings": [
        {"name": delft_config["embeddings_name"], "path": str(vectors), "type": "glove", "format": "vec",
         "lang": "en", "item": "word"}]}), encoding="utf-8")

    documents = {TRAINED: _document_files(_unlabelled_sequences(train), root / "docs-date", 3),
                 FROM_GROBID_TAGGER: _document_files(_unlabelled_sequences(train), root / "docs-name-header", 2),
                 DELFT_MADE: _document_files(delft_lines, root / "docs-delft", 2)}
    steps = [f"train,{FROM_GROBID_TAGGER[0]},{FROM_GROBID_TAGGER[1]},{train}",
             f"label,{TRAINED[0]},{TRAINED[1]},{documents[TRAINED]},{THREADS},{CALLS}",
             f"label,{FROM_GROBID_TAGGER[0]},{FROM_GROBID_TAGGER[1]},{documents[FROM_GROBID_TAGGER]},2,2",
             f"label,{DELFT_MADE[0]},{DELFT_MADE[1]},{documents[DELFT_MADE]},2,2"]
    out = root / "out"
    python_paths = [TEXTORCH_ROOT, *jvm_tools.python_paths(), str(found.jep_package.parent)]
    env = {**os.environ,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),  # GROBID runs python3
           "PYTHONPATH": os.pathsep.join(filter(None, [TEXTORCH_ROOT, os.environ.get("PYTHONPATH")])),
           "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [jvm_tools.python_library_dir(),
                                                            os.environ.get("LD_LIBRARY_PATH")])),
           "OMP_NUM_THREADS": "1"}
    command = [str(found.java), "-cp", os.pathsep.join([str(classes), str(found.jar)]),
               f"-Djava.library.path={found.jep_package}", f"-Dgrobid.bridge={bridge}", f"-Dgrobid.models={models}",
               f"-Dpython.paths={os.pathsep.join(python_paths)}", "GrobidCalls", str(out), *steps]
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=600, check=False)
    return JvmRun(out, done.stdout + done.stderr, documents)


# ---------------------------------------------------------------------------- reading the answers

def _java_labels(path: Path, document: Path) -> list[list[str]]:
    """The labels in a text GROBID's ``label`` returned, per sequence of the document, after
    checking that it holds every input line, in order, each with one label."""
    answer = path.read_text(encoding="utf-8").splitlines()
    sequences = [block.splitlines() for block in document.read_text(encoding="utf-8").strip().split("\n\n")]
    assert [line.rsplit("\t", 1)[0] for line in answer] == [line.replace(" ", "\t") for s in sequences for line in s]
    labels = iter(line.rsplit("\t", 1)[1] for line in answer)
    return [[next(labels) for _ in s] for s in sequences]


def _grobid_label(delft: str) -> str:
    """GROBID's spelling of a DeLFT label, as GROBID's Java writes it: B-x starts a field (I-x),
    I-x continues it (x), O is <other>, anything else is kept."""
    if delft == "O":
        return "<other>"
    return {"B-": "I-", "I-": ""}.get(delft[:2], delft[:2]) + delft[2:]


def _delft_label(grobid: str) -> str:
    """DeLFT's label back from the GROBID spelling GROBID's Java gives it (``<x>`` continues a
    field, ``I-<x>`` starts one, ``<other>`` is outside)."""
    if grobid == "<other>":
        return "O"
    return f"B-{grobid[2:]}" if grobid.startswith("I-") else f"I-{grobid}"


def _cli_labels(model_dir: Path, documents: Path, out: Path) -> list[list[str]]:
    """``textorch grobid MODEL tag`` on the documents, one after the other, in its GROBID spelling."""
    texts = [p.read_text(encoding="utf-8").strip() for p in sorted(documents.glob("doc-*.txt"))]
    data = out.with_suffix(".input")
    data.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    assert main(["grobid", "date", "tag", "--input", str(data), "--output", str(model_dir), "--tag-output", str(out)]) == 0
    return [record["labels"] for record in json.loads(out.read_text(encoding="utf-8"))["texts"]]


def _single_thread(run: JvmRun, step: int, model: tuple[str, str]) -> list[list[str]]:
    folder, documents = run.step(step), run.documents[model]
    count = len(list(documents.glob("doc-*.txt")))
    return [s for d in range(count) for s in _java_labels(folder / f"single-{d}.txt", documents / f"doc-{d}.txt")]


# ---------------------------------------------------------------------------- the checks

def test_labels_from_the_jvm_equal_grobid_tag(jvm_run: JvmRun, tmp_path: Path) -> None:
    java = _single_thread(jvm_run, 2, TRAINED)
    cli = _cli_labels(jvm_run.out.parent / "grobid-home" / "models" / "-".join(TRAINED), jvm_run.documents[TRAINED],
                      tmp_path / "cli.json")
    assert len(java) == len(cli) == 30
    assert [iob2_to_grobid([_delft_label(x) for x in s]) for s in java] == cli
    assert {x for s in java for x in s} <= {"<other>", *(f"{p}<{f}>" for p in ("", "I-") for f in ("month", "day", "year"))}


@pytest.mark.parametrize(("step", "model", "threads", "calls"),
                         [(2, TRAINED, THREADS, CALLS), (3, FROM_GROBID_TAGGER, 2, 2), (4, DELFT_MADE, 2, 2)])
def test_java_threads_give_the_labels_of_one_thread(jvm_run: JvmRun, step, model, threads, calls) -> None:
    folder = jvm_run.step(step)
    answers = sorted(folder.glob("thread-*-call-*-doc-*.txt"))
    assert len(answers) == threads * calls
    for answer in answers:
        document = answer.stem.rsplit("-", 1)[1]
        assert answer.read_text(encoding="utf-8") == (folder / f"single-{document}.txt").read_text(encoding="utf-8"), answer.name


def test_a_delft_made_model_loads_with_the_users_registry_and_labels_as_delft(jvm_run: JvmRun) -> None:
    expected = json.loads((DELFT_FIXTURES / "expected.json").read_text(encoding="utf-8"))["labels"][DELFT_MADE[1]]
    java = _single_thread(jvm_run, 4, DELFT_MADE)
    assert java == [[_grobid_label(x) for x in s] for s in expected]


def test_training_through_grobid_tagger_writes_a_model_that_labels(jvm_run: JvmRun, tmp_path: Path) -> None:
    assert (jvm_run.step(1) / "exit-code.txt").read_text() == "0", jvm_run.log[-4000:]
    model_dir = jvm_run.out.parent / "grobid-home" / "models" / "-".join(FROM_GROBID_TAGGER)
    assert (model_dir / "config.json").is_file()
    java = _single_thread(jvm_run, 3, FROM_GROBID_TAGGER)
    cli = _cli_labels(model_dir, jvm_run.documents[FROM_GROBID_TAGGER], tmp_path / "cli.json")
    assert len(java) == len(cli) == 30
    assert [iob2_to_grobid([_delft_label(x) for x in s]) for s in java] == cli
