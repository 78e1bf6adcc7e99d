"""The CUDA paths: training in each precision, saving, loading on another device, tagging.

What needs a GPU is skipped without one (CI has none); run it on a GPU machine with
``python -m pytest tests/train/test_cuda.py tests/models/test_crf.py -k cuda``. The model trained on the GPU
must save fp32 weights that load and tag identically on the CPU, so a model trained on a GPU
server runs unchanged where GROBID tags (usually a CPU). The refusals of ``--device cuda`` and
``--devices N`` beyond the GPUs there are run everywhere: with a GPU count made smaller than the
machine's, or by asking for one more GPU than it has.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from textorch.tagging.labeler import SequenceLabeler
from textorch.model_dir import load_model_dir

REPO = Path(__file__).resolve().parents[2]

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (GPU paths run on a GPU machine)")


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "textorch.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


@needs_gpu
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_train_on_cuda_then_tag_on_cpu_and_cuda(tiny_grobid: Path, tmp_path: Path, precision: str) -> None:
    model = tmp_path / "model"
    result = _cli("seq", "train", "--train", tiny_grobid, "--output", model, "--max-epoch", "25", "--early-stop",
                  "false", "--device", "cuda", "--precision", precision, "--seed", "3", "--batch-size", "8")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    _, _, state = load_model_dir(model)
    assert all(t.dtype in (torch.float32, torch.int64, torch.bool) for t in state.values())
    on_cpu = SequenceLabeler.load(model, device="cpu")
    on_gpu = SequenceLabeler.load(model, device="cuda")
    assert next(on_gpu.model.parameters()).is_cuda
    scores = on_gpu.evaluate(tiny_grobid)
    assert scores["f1"] > 0.9, scores
    assert on_cpu.evaluate(tiny_grobid)["f1"] == pytest.approx(scores["f1"])
    sequences = [[[t, t.lower(), "LINEIN", "NOCAPS", "NOPUNCT"] for t in ("June", "3", ",", "1999")],
                 [[t, t.lower(), "LINEIN", "NOCAPS", "NOPUNCT"] for t in ("12", "May", "2001")]]
    assert [t["labels"] for t in on_cpu.tag(sequences)["texts"]] == [t["labels"] for t in on_gpu.tag(sequences)["texts"]]


@needs_gpu
def test_tag_and_eval_cli_on_cuda_equal_cpu(tiny_grobid: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    assert _cli("seq", "train", "--train", tiny_grobid, "--output", model, "--max-epoch", "5", "--device", "cuda").returncode == 0
    outputs = {}
    for device in ("cpu", "cuda"):
        out = tmp_path / f"tagged-{device}.txt"
        result = _cli("seq", "tag", "--model", model, "--input", tiny_grobid, "--input-format", "grobid", "--output",
                      out, "--device", device)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[device] = out.read_text()
    assert outputs["cpu"] == outputs["cuda"]


def test_more_devices_than_gpus_is_a_clear_error(tiny_grobid: Path, tmp_path: Path) -> None:
    """The real command, with one GPU more than the machine has (one, on a machine without)."""
    too_many = torch.cuda.device_count() + 1
    result = _cli("seq", "train", "--train", tiny_grobid, "--output", tmp_path / "m", "--device", "cuda", "--devices",
                  too_many, timeout=120)
    assert result.returncode == 2
    assert f"--devices {too_many}" in result.stderr and "Traceback" not in result.stderr


@needs_gpu
def test_single_process_torchrun_on_one_gpu_saves_the_model(tiny_grobid: Path, tmp_path: Path) -> None:
    """DeLFT's multi-GPU mode crashed at model save with one GPU; under torchrun with one worker
    the command must train, save and exit 0."""
    model = tmp_path / "model"
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                             "-m", "textorch.cli.main", "seq", "train", "--train", str(tiny_grobid), "--output",
                             str(model), "--max-epoch", "3", "--device", "cuda"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert SequenceLabeler.load(model).evaluate(tiny_grobid)["f1"] >= 0.0
    assert (model / "model.safetensors").exists()


@needs_gpu
def test_transformer_tagger_bf16_on_cuda(tmp_path: Path, tiny_grobid: Path) -> None:
    from tiny_transformer import write_tiny_bert

    words = ["June", "May", "March", "July", "Jan", ","] + [str(i) for i in range(1, 32)] + [str(y) for y in range(1990, 2020)]
    encoder = write_tiny_bert(tmp_path / "bert", words, hidden=32, layers=2)
    model = tmp_path / "model"
    result = _cli("seq", "train", "--train", tiny_grobid, "--output", model, "--architecture", "BERT_CRF",
                  "--transformer", encoder, "--max-epoch", "3", "--device", "cuda", "--precision", "bf16")
    assert result.returncode == 0, result.stderr[-2000:]
    on_gpu = SequenceLabeler.load(model, device="cuda")
    on_cpu = SequenceLabeler.load(model, device="cpu")
    assert on_gpu.evaluate(tiny_grobid)["f1"] == pytest.approx(on_cpu.evaluate(tiny_grobid)["f1"], abs=0.02)


@pytest.mark.parametrize("command, gpus", [
    (["seq", "train", "--device", "cuda"], 0),
    (["seq", "train", "--device", "cuda", "--devices", "2"], 1),
    (["seq", "tag", "--device", "cuda"], 0),
    (["cls", "train", "--device", "cuda"], 0),
])
def test_cuda_beyond_the_gpus_there_is_refused_before_any_work(
        command: list[str], gpus: int, tiny_grobid: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    """``--device cuda`` with fewer GPUs than asked for: one line, exit 2, nothing read, built or written."""
    from textorch.classification.classifier import TextClassifier
    from textorch.cli.main import main

    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    built = []
    for predictor in (SequenceLabeler, TextClassifier):
        monkeypatch.setattr(predictor, "build", lambda *a, **k: built.append(a))
        monkeypatch.setattr(predictor, "load", lambda *a, **k: built.append(a))
    output = tmp_path / "out"
    files = (["--model", str(tmp_path / "model"), "--input", str(tiny_grobid), "--output", str(output)]
             if command[1] == "tag" else ["--train", str(tiny_grobid), "--output", str(output)])
    assert main([*command, *files]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("textorch: error: "), errors
    assert "--device cuda" in errors[0] and f"has {gpus} GPU(s)" in errors[0]
    assert built == [] and not output.exists()
