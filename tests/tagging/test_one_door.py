"""One owner of the engine, one default: every door tags with the same labels (compared in GROBID's
style, which the commands and the server answer for GROBID models; the facade's IOB2 rewritten
so, sequence by sequence), by default on the
fastest path (:mod:`textorch.onnx.opening`), on a textorch-trained model and on one imported from
DeLFT; a model with an export tags from the command line without importing PyTorch; and no
module but the owner and the task openers reaches the engines' runners."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

import textorch  # noqa: E402
from tests.conftest import cli_trained_tagger, write_tiny_grobid  # noqa: E402
from textorch.cli.main import main  # noqa: E402
from textorch.data.tags import iob2_to_grobid  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent / "delft_import"))
from test_importer import EXPECTED, FIXTURES, delft_dir  # noqa: E402

TEXTORCH = Path(textorch.__file__).resolve().parent
DELFT_KEPT = [i for i, labels in enumerate(EXPECTED["labels"]["BidLSTM_CRF"]) if "<PAD>" not in labels]
"""The DeLFT fixture's sequences less the one where its random model predicts the padding label."""


def _grobid_file(path: Path, sequences: list[list[list[str]]]) -> Path:
    """``sequences`` of rows (a token, then its features) as a GROBID file without labels."""
    path.write_text("".join("".join(" ".join(row) + "\n" for row in rows) + "\n" for rows in sequences), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, Path, list]]]:
    """``name: (model directory, GROBID input, its sequences as rows)`` for a model textorch trained
    and one DeLFT 1.2 made, imported; caches kept inside the test's folder."""
    root = tmp_path_factory.mktemp("one-door")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TEXTORCH_CACHE_DIR", str(root / "cache"))
        trained = cli_trained_tagger(root / "textorch-model", write_tiny_grobid(root / "train.grobid"))
        textorch_rows = [[line.split()[:-1] for line in block.splitlines() if line.strip()]
                         for block in (root / "train.grobid").read_text(encoding="utf-8").split("\n\n")]
        textorch_rows = [rows for rows in textorch_rows if rows][:12]
        imported = root / "delft-model"
        assert main(["import-delft", str(delft_dir(root, "BidLSTM_CRF")), str(imported),
                     "--embeddings", str(FIXTURES / "vectors.txt")]) == 0
        delft_rows = [[[token, *[f"f{j}" for j in range(16)]] for token in EXPECTED["tokens"][i]] for i in DELFT_KEPT]
        yield {
            "textorch": (trained, _grobid_file(root / "textorch-input.grobid", textorch_rows), textorch_rows),
            "delft": (imported, _grobid_file(root / "delft-input.grobid", delft_rows), delft_rows),
        }


def _seq_tag(model: Path, data: Path, output: Path, *options: str) -> list[str]:
    assert main(["seq", "tag", "--model", str(model), "--input", str(data), "--input-format", "grobid",
                 "--output", str(output), "--quiet", *options]) == 0
    return [line.split()[-1] for line in output.read_text(encoding="utf-8").splitlines() if line.strip()]


def _grobid_tag(model: Path, data: Path, output: Path, *options: str) -> list[str]:
    assert main(["grobid", "date", "tag", "--output", str(model), "--input", str(data), "--tag-output", str(output),
                 "--quiet", *options]) == 0
    return [label for text in json.loads(output.read_text(encoding="utf-8"))["texts"] for label in text["labels"]]


def _served(model: Path, rows: list, *options: str) -> tuple[list[str], str]:
    from fastapi.testclient import TestClient

    from textorch.serve.app import create_app
    from textorch.serve.config import ServerConfig
    from textorch.serve.models import load_models

    engine = {"engine": options[1]} if options else {}  # the server's default when no --engine is given
    served = load_models([f"date={model}"], "cpu", **engine)
    with TestClient(create_app(served, ServerConfig(port=0))) as client:
        response = client.post("/models/date/tag", json={"sequences": [[row[0] for row in seq] for seq in rows]})
    assert response.status_code == 200, response.text
    return [label for text in response.json()["texts"] for label in text["labels"]], served["date"].engine


def _facade(model: Path, rows: list) -> tuple[list[str], object]:
    from textorch.tagging.delft.facade import Sequence

    sequence = Sequence("date")
    sequence.load(str(model))  # the model directory itself, as GROBID may name it
    tagged = sequence.tag([[row[0] for row in seq] for seq in rows], None, features=[[row[1:] for row in seq] for seq in rows])
    delft_style = [[label for _, label in text] for text in tagged]
    assert not any(label.startswith("<") for labels in delft_style for label in labels)  # IOB2, as DeLFT answers
    return [label for labels in delft_style for label in iob2_to_grobid(labels)], sequence.labeler


@pytest.mark.parametrize("kind", ["textorch", "delft"])
def test_every_door_gives_the_same_labels_by_default_and_with_the_torch_engine(
        models: dict, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.onnx.engine import AutoRunner

    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(Path(models[kind][0]).parent / "cache"))
    model, data, rows = models[kind]
    shutil.rmtree(model / "onnx", ignore_errors=True)
    torch_labels = _seq_tag(model, data, tmp_path / "torch.grobid", "--engine", "torch")
    assert not (model / "onnx").exists()  # --engine torch keeps PyTorch alone: nothing exported
    found = {
        "seq tag --engine torch": torch_labels,
        "seq tag": _seq_tag(model, data, tmp_path / "default.grobid"),  # no export yet: made on first use
        "grobid tag": _grobid_tag(model, data, tmp_path / "default.json"),  # with the export: the torch-free tagger
        "grobid tag --engine torch": _grobid_tag(model, data, tmp_path / "torch.json", "--engine", "torch"),
    }
    assert (model / "onnx" / "model.onnx").is_file()
    found["server"], engine = _served(model, rows)
    assert engine == "auto"
    found["server --engine torch"], engine = _served(model, rows, "--engine", "torch")
    assert engine == "pytorch"
    found["facade"], labeler = _facade(model, rows)
    assert isinstance(labeler.runner, AutoRunner)  # GROBID's small calls in ONNX Runtime
    assert len(torch_labels) == sum(len(seq) for seq in rows)
    assert {door: labels for door, labels in found.items() if labels != torch_labels} == {}


def test_a_freshly_trained_model_tags_by_default_without_importing_torch(
        models: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training writes the export; the first ``seq tag`` without options then runs in a fresh
    interpreter without importing torch (or Numba), with the labels the PyTorch engine gives."""
    from textorch.onnx.trained_export import DISABLE_ENV

    monkeypatch.delenv(DISABLE_ENV, raising=False)  # the suite trains without it (tests/conftest.py)
    _, data, _ = models["textorch"]
    model = cli_trained_tagger(tmp_path / "model", write_tiny_grobid(tmp_path / "train.grobid"))
    assert (model / "onnx" / "onnx-model.json").is_file()  # written by training
    tagged = tmp_path / "default.grobid"
    script = ("import sys\nfrom textorch.cli.main import main\n"
              f"code = main(['seq', 'tag', '--model', {str(model)!r}, '--input', {str(data)!r}, '--input-format', "
              f"'grobid', '--output', {str(tagged)!r}, '--quiet'])\n"
              "print(code, sorted(m for m in ('torch', 'numba') if m in sys.modules))\n")
    env = {"PYTHONPATH": str(TEXTORCH.parent), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "TEXTORCH_CACHE_DIR": str(tmp_path / "cache"), "CUDA_VISIBLE_DEVICES": "", "ORT_DISABLE_TELEMETRY": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.split("\n")[-2] == "0 []", done.stdout + done.stderr
    assert "without PyTorch" in done.stderr
    labels = [line.split()[-1] for line in tagged.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert labels == _seq_tag(model, data, tmp_path / "torch.grobid", "--engine", "torch")


ENGINE_MODULES = {"textorch.onnx.engine", "textorch.tagging.onnx_tagger"}
"""Where the runners (``OnnxRunner``, ``OnnxClassifierRunner``, ``AutoRunner``, ``attach_onnx``...) and
the torch-free tagger (``OnnxTagger``, its ``open``) live."""
OWNERS = {"onnx/opening.py", "tagging/opening.py", "classification/opening.py"}
CHECKS = {"onnx/int8_agreement.py": {"OnnxRunner", "OnnxClassifierRunner"}}
"""Modules that run the runners for a check of their own, never for a door: training's int8 check
runs an export's float and int8 graphs side by side and gives the predictor back as it came."""
ENGINE_NAMES = {"OnnxRunner", "OnnxClassifierRunner", "AutoRunner", "attach_onnx", "ensure_export", "OnnxTagger"}
"""What chooses or builds a runner; ``export_model`` and ``default_export_dir`` make an export
(``textorch export onnx``) and are not in this list."""


def _engine_imports(tree: ast.Module) -> set[str]:
    """The names a module imports from the engines' modules at run time (imports under ``if
    TYPE_CHECKING:`` are annotations only)."""
    typing_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(branch.test) for child in branch.body for node in ast.walk(child)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module in ENGINE_MODULES:
            found |= {alias.name for alias in node.names if alias.name in ENGINE_NAMES}
        elif isinstance(node, ast.ImportFrom) and node.module in ("textorch.onnx", "textorch.tagging"):
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if f"{node.module}.{alias.name}" in ENGINE_MODULES}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in ENGINE_MODULES}
    return found


def test_only_the_owner_and_the_task_openers_reach_the_engines() -> None:
    reaching = {}
    for path in sorted(TEXTORCH.rglob("*.py")):
        relative = path.relative_to(TEXTORCH).as_posix()
        if relative in OWNERS or f"textorch.{relative[:-3].replace('/', '.')}" in ENGINE_MODULES:
            continue
        names = _engine_imports(ast.parse(path.read_text(encoding="utf-8"))) - CHECKS.get(relative, set())
        if names:
            reaching[relative] = sorted(names)
    assert reaching == {}
    # The rule can fail: the owner itself reaches them, and so would a door that imported them.
    assert "textorch.onnx.engine" in _engine_imports(ast.parse((TEXTORCH / "onnx" / "opening.py").read_text()))
    assert _engine_imports(ast.parse("from textorch.onnx.engine import AutoRunner\n")) == {"AutoRunner"}
    assert _engine_imports(ast.parse("if TYPE_CHECKING:\n    from textorch.tagging.onnx_tagger import OnnxTagger\n")) == set()


def test_a_delft_directory_is_tagged_from_its_conversion_and_never_written_to(
        models: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The export goes beside the conversion in the cache; from the second call on, the command
    tags the DeLFT directory without PyTorch."""
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    source = delft_dir(tmp_path, "BidLSTM_CRF")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in source.iterdir())
    monkeypatch.setenv("TEXTORCH_EMBEDDINGS_REGISTRY", str(tmp_path / "registry.json"))
    name = json.loads((source / "config.json").read_text(encoding="utf-8"))["embeddings_name"]
    (tmp_path / "registry.json").write_text(json.dumps({"embeddings": [{"name": name, "path": str(FIXTURES / "vectors.txt")}]}))
    _, data, _ = models["delft"]
    outputs = [_seq_tag(source, data, tmp_path / f"{i}.grobid") for i in range(2)]
    assert outputs[0] == outputs[1]
    assert capsys.readouterr().err.count("runs with ONNX Runtime from its export, without PyTorch") == 1
    assert sorted((p.name, p.stat().st_mtime_ns) for p in source.iterdir()) == before
    assert [p.parent.name for p in (tmp_path / "cache").rglob("onnx-model.json")] == ["onnx"]


def test_the_owner_refuses_what_does_not_go_together_and_leaves_gpus_bf16_and_transformers_to_pytorch() -> None:
    import torch
    from types import SimpleNamespace

    from textorch.errors import ConfigError
    from textorch.onnx.opening import EngineOptions, auto_engine_blocker, torch_free_blocker

    for options, message in ((EngineOptions("tensorrt"), "--engine must be one of"),
                             (EngineOptions(quantized=True), "need --engine onnx"),
                             (EngineOptions("torch", onnx_dir="x"), "need --engine onnx"),
                             (EngineOptions("onnx", device="cuda"), "runs on the CPU"),
                             (EngineOptions("onnx", device=torch.device("cuda", 0)), "runs on the CPU"),
                             (EngineOptions("onnx", precision="bf16"), "needs --engine torch")):
        with pytest.raises(ConfigError, match=message):
            options.check()
    assert EngineOptions("onnx", device="auto").session_device() == "cpu"  # auto must not pick a GPU for it
    assert EngineOptions(device="auto").session_device() == "auto"  # the default: a GPU keeps PyTorch
    assert torch_free_blocker(EngineOptions("torch")) == "--engine torch"
    assert "bf16" in torch_free_blocker(EngineOptions(precision="bf16"))
    assert torch_free_blocker(EngineOptions(device="cuda")) == "--device cuda"
    tagger = SimpleNamespace(task="sequence_labelling", transformer=None, device=torch.device("cpu"), precision="fp32")
    assert auto_engine_blocker(tagger) is None
    assert "cuda" in auto_engine_blocker(SimpleNamespace(**{**vars(tagger), "device": torch.device("cuda", 0)}))
    assert "bf16" in auto_engine_blocker(SimpleNamespace(**{**vars(tagger), "precision": "bf16"}))
    assert "transformer" in auto_engine_blocker(SimpleNamespace(**{**vars(tagger), "transformer": object()}))
