"""Per-epoch training history kept in every trained model directory.

Why in the model directory: the numbers that explain a model (how fast the loss fell, at which
epoch the validation score peaked, how long it took) are otherwise lost with the terminal
scroll-back. ``save()`` writes them as part of the same atomic save as the weights:

* ``history.json``: the whole record (runs, epochs, best epoch, final scores, n-fold summary);
* ``history.csv``: one row per epoch of every run, for spreadsheets and plotting tools;
* ``learning-curves.png``: loss and validation score per epoch (see :mod:`textorch.train.curves`).

A history has one *run* per training: one for a plain training, one per fold with
``--fold-count N`` (``kept_run`` says whose weights were saved), and the runs of the input
model followed by a continuing run after ``--incremental`` training.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from textorch.errors import ModelFormatError
from textorch.model_dir import require_directory
from textorch.train.trainer import TrainingResult

HISTORY_JSON = "history.json"
HISTORY_CSV = "history.csv"
CURVES_PNG = "learning-curves.png"
HISTORY_FILES = (HISTORY_CSV, HISTORY_JSON, CURVES_PNG)
CSV_COLUMNS = ("run", "epoch", "loss", "valid_score", "learning_rate", "seconds", "tokens_per_s")


@dataclass
class RunRecord:
    """One training run: its epochs (``EpochRecord`` fields as dicts) and outcome."""

    name: str
    epochs: list[dict]
    best_epoch: int = 0
    best_score: float | None = None
    stopped_early: bool = False
    train_seconds: float = 0.0
    tokens_per_s: float = 0.0
    continues: bool = False
    """True when this run continued the weights of the run before it (incremental training):
    plots draw it after that run instead of from epoch 1."""

    @classmethod
    def from_result(cls, name: str, result: TrainingResult, continues: bool = False) -> "RunRecord":
        return cls(
            name=name,
            epochs=[asdict(record) for record in result.history],
            best_epoch=result.best_epoch,
            best_score=result.best_score,
            stopped_early=result.stopped_early,
            train_seconds=result.train_seconds,
            tokens_per_s=result.tokens_per_s,
            continues=continues,
        )


@dataclass
class TrainingHistory:
    """What a model directory records about the training that produced its weights."""

    task: str
    metric: str
    """Name of the validation score of each epoch (``f1``, ``macro_f1``, ``roc_auc``)."""
    runs: list[RunRecord] = field(default_factory=list)
    kept_run: int | None = None
    """Index of the run whose weights the directory holds (None: the last run)."""
    final_scores: dict | None = None
    """Scores of the saved model on the test data of its training command, when there was some."""
    final_scores_on: str | None = None
    """What ``final_scores`` were computed on (a file name, or the held-out share)."""
    folds: dict | None = None
    """n-fold training: per-fold scores and their mean and standard deviation."""

    @classmethod
    def single(cls, task: str, metric: str, result: TrainingResult, name: str = "train") -> "TrainingHistory":
        return cls(task, metric, [RunRecord.from_result(name, result)])

    @property
    def kept(self) -> RunRecord:
        return self.runs[self.kept_run if self.kept_run is not None else -1]

    def to_json(self) -> dict:
        return _finite(asdict(self))

    @classmethod
    def from_json(cls, data: dict) -> "TrainingHistory":
        runs = [RunRecord(**{k: v for k, v in run.items() if k in RunRecord.__dataclass_fields__}) for run in data["runs"]]
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "runs"}
        return cls(runs=runs, **known)


def record_final_scores(history: TrainingHistory | None, scores: dict | None, on: str) -> None:
    """Keep the test scores of a training command in its history (nothing without either)."""
    if history is not None and scores is not None:
        history.final_scores, history.final_scores_on = scores, on


def _finite(value: object) -> object:
    """NaN and infinities become null: strict JSON readers (Java's, JavaScript's) refuse them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def history_csv(history: TrainingHistory) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for run in history.runs:
        for epoch in run.epochs:
            writer.writerow([run.name, *("" if epoch.get(k) is None else epoch[k] for k in CSV_COLUMNS[1:])])
    return out.getvalue()


def history_files(history: TrainingHistory | None) -> dict[str, str | bytes]:
    """The files ``save()`` adds to a model directory (none for a model that was never trained).

    The PNG is left out, with a warning, when matplotlib is not installed (the ``reports`` extra).
    """
    if history is None or not history.runs:
        return {}
    from textorch.train.curves import learning_curves_png

    files: dict[str, str | bytes] = {
        HISTORY_JSON: json.dumps(history.to_json(), indent=2, ensure_ascii=False) + "\n",
        HISTORY_CSV: history_csv(history),
    }
    png = learning_curves_png(history)
    if png is not None:
        files[CURVES_PNG] = png
    return files


def read_history(directory: str | Path) -> TrainingHistory:
    """The history of a model directory; a clear error when it has none or it is damaged."""
    path = require_directory(directory) / HISTORY_JSON
    if not path.is_file():
        raise ModelFormatError(
            f"{path}: missing; the model was saved without training (or by a textorch before 0.1 reports)"
        )
    try:
        return TrainingHistory.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise ModelFormatError(f"{path}: not a textorch training history ({exc})") from None
