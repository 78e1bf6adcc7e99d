"""DeLFT 1.2.0's own labels against textorch's, on GROBID date models DeLFT trained and textorch
imports: the parity check of ``benchmarks/parity/bench_delft_import.py`` as a test. It reads what
a run of that benchmark left in the bench work dir (DeLFT's model and its labels of the test
split, written inside DeLFT's venv), so it needs no DeLFT here; skipped, with the reason, where
no run left them."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.parity import bench_delft_import
from benchmarks.peers import delft_env

ARCHITECTURES = [run.split(":")[1] for run in bench_delft_import.RUNS
                 if run.startswith("date:") and "BERT" not in run]
"""The benchmark's date runs with word vectors (BERT_CRF also needs its local transformer)."""


@pytest.mark.real_data
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_the_imported_model_labels_every_token_as_delft_did(architecture: str, tmp_path: Path) -> None:
    work = delft_env.bench_dir()
    name = f"date-{architecture}"
    model = work / "import-parity" / "models" / name
    labels = work / "import-parity" / f"{name}.delft-labels.json"
    test_file = work / "data" / "sequenceLabelling" / "grobid" / "date" / f"seed{bench_delft_import.SEED}" / "test.txt"
    for path, what in ((model / "config.json", "DeLFT-trained model"), (labels, "DeLFT labels"),
                       (test_file, "test split")):
        if not path.is_file():
            pytest.skip(f"no {what} at {path} (`python -m benchmarks bench_delft_import --runs date:{architecture}` "
                        "writes it, with DeLFT's venv)")
    if not delft_env.shared_embeddings().is_file():
        pytest.skip(f"{delft_env.shared_embeddings()} not found (../shared/embeddings)")
    row = bench_delft_import.textorch_side(model, labels, str(test_file), "grobid", tmp_path)
    assert row["sequences"] > 0 and row["tokens"] > 0
    assert row["agreeing_tokens"] == row["tokens"] and row["identical_sequences"] == row["sequences"]
