"""DeLFT 1.2.0's own ONNX export against textorch's export of the imported model, where DeLFT's
venv (``benchmarks/peers/delft_env.py``) and a model it trained (``benchmarks/parity/delft_onnx_parity.py``
or ``bench_delft_import.py`` make them) are present; skipped elsewhere, with the reason."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

from benchmarks.peers import delft_env  # noqa: E402


def _ready(architecture: str) -> tuple[Path, Path, Path]:
    python = delft_env.venv_python()
    if not python.exists():
        pytest.skip(f"no DeLFT venv at {delft_env.venv_dir()} (python -m benchmarks delft_env makes it)")
    if subprocess.run([str(python), "-c", "import delft, onnx"], capture_output=True).returncode != 0:
        pytest.skip("DeLFT's venv lacks delft or onnx (benchmarks/parity/delft_onnx_parity.py installs onnx there)")
    model = delft_env.bench_dir() / "import-parity" / "models" / f"date-{architecture}"
    if not (model / "config.json").is_file():
        pytest.skip(f"no DeLFT-made model at {model} (python -m benchmarks delft_onnx_parity trains it)")
    if not delft_env.shared_embeddings().is_file():
        pytest.skip(f"{delft_env.shared_embeddings()} not found (../shared/embeddings)")
    test_file = delft_env.bench_dir() / "data" / "sequenceLabelling" / "grobid" / "date" / "seed1" / "test.txt"
    if not test_file.is_file():
        pytest.skip(f"no {test_file} (benchmarks/peers/bench_data.py writes it)")
    return python, model, test_file


def test_delfts_export_equals_textorchs_export_of_the_import(tmp_path):
    """The _FEATURES model (every input of the layout); the benchmark runs the others."""
    python, model, test_file = _ready("BidLSTM_CRF_FEATURES")
    from benchmarks.parity import delft_onnx_parity

    delft_out, textorch_out = delft_onnx_parity.both_exports(python, delft_env.bench_dir(), model, tmp_path)
    row = delft_onnx_parity.compare(delft_out, textorch_out, str(test_file), batch_size=16)
    assert row["files_equal"] and row["vocab.json_equal"] and row["config.json_equal"] and row["io_equal"]
    assert row["crf_max_diff"] <= 1e-6
    assert row["emissions_max_diff"] <= 1e-4 and row["emissions_max_abs"] > 0.1
    assert row["viterbi_labels_equal_sequences"] == row["sequences"] > 0
