"""DeLFT's ONNX export against textorch's export of the same model in DeLFT's layout.

For each (task, architecture): DeLFT 1.2.0 trains a small model in its own venv (as
``bench_delft_import.py`` does, and reusing its models), DeLFT exports it with
``python -m delft.applications.onnx_export`` (which needs the ``onnx`` package in that venv:
installed there on first use), textorch imports it (``textorch import-delft SRC OUT
--embeddings FILE``) and exports the import (``textorch export onnx --layout delft``). Then:

- ``vocab.json`` and ``config.json``: equal as JSON (and whether byte for byte);
- ``crf_params.json``: largest absolute difference (must be <= 1e-6);
- ``encoder.onnx``: both graphs run under ONNX Runtime (one thread) on the same padded batches of
  the task's test file, encoded as DeLFT's Java runner encodes them (word vectors by DeLFT's rule,
  character ids of ``charVocab``, feature ids of ``featuresMapToIndex``, right padding with
  zeros); largest absolute difference of the emissions over every position, padding included
  (must be <= 1e-4), and whether Viterbi over ``crf_params.json`` gives the same labels.

Usage:
    python -m benchmarks delft_onnx_parity                        # the runs below
    python -m benchmarks delft_onnx_parity --runs date:BidLSTM_CRF --batch-size 16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.peers import delft_env
from benchmarks.peers.bench_data import prepare
from benchmarks.parity.bench_delft_import import SEED, _limited, delft_side
from benchmarks.common import machine, print_table, write_json
from textorch.models.cpu_decoder import viterbi_paths

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUNS = ["date:BidLSTM_CRF", "date:BidLSTM_CRF_FEATURES", "name-header:BidLSTM_CRF_FEATURES"]
FILES = ("vocab.json", "config.json", "crf_params.json", "encoder.onnx")


def _one_thread_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def _run(cmd: list[str], cwd: Path) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=cwd, check=True, env=_one_thread_env(), stdout=subprocess.DEVNULL)


def ensure_onnx(python: Path) -> str:
    """DeLFT's exporter checks its graph with the ``onnx`` package: install it in DeLFT's venv once."""
    probe = [str(python), "-c", "import onnx; print(onnx.__version__)"]
    done = subprocess.run(probe, capture_output=True, text=True)
    if done.returncode != 0:
        _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "onnx"], cwd=REPO)
        done = subprocess.run(probe, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def both_exports(python: Path, work: Path, model_dir: Path, root: Path | None = None) -> tuple[Path, Path]:
    """DeLFT's export of its model, and textorch's export of the model's import (under ``root``)."""
    root = root or work / "onnx-parity" / model_dir.name
    delft_out, imported, textorch_out = root / "delft", root / "imported", root / "textorch"
    _run([str(python), "-m", "delft.applications.onnx_export", "--model", model_dir.name, "--output", str(delft_out),
          "--model-path", str(model_dir.parent)], cwd=work)
    cli = [sys.executable, "-m", "textorch.cli.main"]
    _run([*cli, "import-delft", str(model_dir), str(imported), "--embeddings", str(delft_env.shared_embeddings())],
         cwd=work)
    _run([*cli, "export", "onnx", "--layout", "delft", "--model", str(imported), "--output", str(textorch_out)],
         cwd=work)
    return delft_out, textorch_out


class RunnerInputs:
    """Padded batches encoded as DeLFT's Java runner encodes one sequence (``docs/onnx.md``)."""

    def __init__(self, export: Path) -> None:
        from textorch.embeddings import open_embeddings
        from textorch.embeddings.lookup import DelftLookup

        vocab = json.loads((export / "vocab.json").read_text(encoding="utf-8"))
        self.chars, self.max_chars = vocab["charVocab"], int(vocab["maxCharLength"])
        self.unk = self.chars.get("<UNK>", 1)
        self.columns = vocab.get("featuresIndices") or []
        self.maps = {int(k): v for k, v in (vocab.get("featuresMapToIndex") or {}).items()}
        self.words = DelftLookup(open_embeddings(str(delft_env.shared_embeddings())))

    def batch(self, sequences) -> dict[str, np.ndarray]:
        length = max(len(s.tokens) for s in sequences)
        vectors = np.zeros((len(sequences), length, self.words.dim), dtype=np.float32)
        chars = np.zeros((len(sequences), length, self.max_chars), dtype=np.int64)
        feed = {"word_input": vectors, "char_input": chars}
        for b, sequence in enumerate(sequences):
            found, _ = self.words.lookup(list(sequence.tokens))
            vectors[b, : len(sequence.tokens)] = found
            for t, token in enumerate(sequence.tokens):
                units = token.encode("utf-16-le", "surrogatepass")
                for j in range(min(len(units) // 2, self.max_chars)):
                    unit = units[2 * j: 2 * j + 2].decode("utf-16-le", "surrogatepass")
                    chars[b, t, j] = self.chars.get(unit, self.unk)
        if self.columns:
            ids = np.zeros((len(sequences), length, len(self.columns)), dtype=np.int64)
            for b, sequence in enumerate(sequences):
                for t, row in enumerate(sequence.features or []):
                    for slot, column in enumerate(self.columns):
                        ids[b, t, slot] = self.maps.get(column, {}).get(row[column], 0)
            feed["features_input"] = ids
        return feed


def _viterbi(emissions: np.ndarray, crf: dict) -> list[int]:
    """The best path of one sequence's emissions under DeLFT's ``crf_params.json``."""
    trans, start, end = (np.asarray(crf[k], dtype=np.float64) for k in ("transitions", "startTransitions", "endTransitions"))
    return viterbi_paths(emissions[None], np.array([len(emissions)]), trans, start, end)[0].tolist()


def compare(delft_out: Path, textorch_out: Path, test_file: str, batch_size: int) -> dict:
    import onnxruntime as ort

    from textorch.data.readers import read_labelled

    row: dict = {"files_equal": sorted(p.name for p in delft_out.iterdir()) == sorted(
        p.name for p in textorch_out.iterdir()) == sorted(FILES)}
    for name in ("vocab.json", "config.json"):
        a, b = ((d / name).read_text(encoding="utf-8") for d in (delft_out, textorch_out))
        row[f"{name}_equal"] = json.loads(a) == json.loads(b)
        row[f"{name}_bytes_equal"] = a == b
    crf_a, crf_b = (json.loads((d / "crf_params.json").read_text(encoding="utf-8")) for d in (delft_out, textorch_out))
    row["crf_keys_equal"] = list(crf_a) == list(crf_b)
    row["crf_max_diff"] = max(float(np.abs(np.asarray(crf_a[k]) - np.asarray(crf_b[k])).max()) for k in crf_a)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    sessions = [ort.InferenceSession(str(d / "encoder.onnx"), options, providers=["CPUExecutionProvider"])
                for d in (delft_out, textorch_out)]
    row["io_equal"] = all([(v.name, v.type, v.shape) for v in getattr(sessions[0], kind)()] ==
                          [(v.name, v.type, v.shape) for v in getattr(sessions[1], kind)()]
                          for kind in ("get_inputs", "get_outputs"))
    sequences = read_labelled(test_file).sequences
    inputs = RunnerInputs(delft_out)
    worst, largest, tokens, positions, labels_equal = 0.0, 0.0, 0, 0, 0
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        feed = inputs.batch(chunk)
        a, b = (s.run(["emissions"], feed)[0] for s in sessions)
        worst = max(worst, float(np.abs(a - b).max()))
        largest = max(largest, float(np.abs(a).max()))
        positions += a.shape[0] * a.shape[1]
        for k, sequence in enumerate(chunk):
            n = len(sequence.tokens)
            tokens += n
            labels_equal += _viterbi(a[k, :n], crf_a) == _viterbi(b[k, :n], crf_b)
    row.update({"sequences": len(sequences), "tokens": tokens, "padded_positions": positions,
                "emissions_max_diff": worst,
                "emissions_max_abs": largest, "viterbi_labels_equal_sequences": labels_equal})
    row["parity"] = bool(row["files_equal"] and row["vocab.json_equal"] and row["config.json_equal"]
                         and row["crf_keys_equal"] and row["crf_max_diff"] <= 1e-6 and row["io_equal"]
                         and worst <= 1e-4 and labels_equal == len(sequences))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", default=RUNS, help="task:architecture pairs")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per padded batch (default: 32)")
    parser.add_argument("--fresh", action="store_true", help="train the DeLFT models again")
    args = parser.parse_args()
    python, versions = delft_env.ensure()
    versions["onnx"] = ensure_onnx(python)
    work = delft_env.bench_dir()
    tasks = sorted({run.split(":")[0] for run in args.runs})
    files = prepare(work, tasks, [SEED])
    rows = []
    for run in args.runs:
        task, architecture = run.split(":")
        task_files = _limited(files[(task, SEED)], task, work)
        model_dir, _ = delft_side(python, work, task, architecture, task_files, args.fresh, threads=1)
        delft_out, textorch_out = both_exports(python, work, model_dir)
        row = {"task": task, "architecture": architecture,
               **compare(delft_out, textorch_out, task_files.textorch["test"], args.batch_size)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print_table(rows, ["task", "architecture", "vocab.json_equal", "config.json_equal", "crf_max_diff",
                       "emissions_max_diff", "emissions_max_abs", "sequences", "tokens", "viterbi_labels_equal_sequences", "parity"])
    path = write_json("delft-onnx-parity", {
        "benchmark": "delft-onnx-parity", "delft": versions, "machine": machine(), "seed": SEED,
        "batch_size": args.batch_size, "test_files": {t: files[(t, SEED)].textorch["test"] for t in tasks},
        "runs": rows, "threads": 1,
    })
    print(f"wrote {path}")
    if not all(row["parity"] for row in rows):
        raise SystemExit("parity failed: see the table above")


if __name__ == "__main__":
    main()
