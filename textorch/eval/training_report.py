"""Plain-text rendering of a training history (``textorch report DIR``) and of n-fold summaries."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from textorch.eval.cls_metrics import format_cls_report
from textorch.eval.entity_report import format_report
from textorch.train.history import RunRecord, TrainingHistory

_KEYS = ("precision", "recall", "f1")


def _number(value: object, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def format_run(run: RunRecord, metric: str, kept: bool) -> str:
    """A run's summary line and its epoch table; ``*`` marks the epoch whose weights were kept."""
    best = "" if run.best_score is None else f" (validation {metric} {run.best_score:.4f})"
    status = ", stopped early" if run.stopped_early else ""
    saved = ", saved" if kept else ""
    lines = [
        f"run {run.name}: {len(run.epochs)} epochs, best epoch {run.best_epoch}{best}, "
        f"{run.train_seconds:.1f} s, {run.tokens_per_s:.0f} tokens/s{status}{saved}",
        f"{'epoch':>7} {'loss':>11} {'valid ' + metric:>12} {'learning rate':>14} {'seconds':>9} {'tokens/s':>10}",
    ]
    for e in run.epochs:
        mark = "*" if e["epoch"] == run.best_epoch else " "
        lines.append(
            f"{e['epoch']:>6}{mark} {_number(e['loss'], '11.4f')} {_number(e.get('valid_score'), '12.4f')} "
            f"{_number(e['learning_rate'], '14.3e')} {_number(e['seconds'], '9.1f')} {_number(e['tokens_per_s'], '10.0f')}"
        )
    return "\n".join(lines)


def summarize_label_folds(fold_scores: list[dict]) -> dict:
    """Mean and standard deviation over folds of entity-level scores: micro and per label.

    A label missing from a fold's scores (no gold and no predicted entity there) counts as
    absent from that fold, not as a zero.
    """
    def stats(rows: list[Mapping]) -> tuple[dict, dict]:
        mean = {k: statistics.fmean(r[k] for r in rows) for k in _KEYS}
        sd = {k: statistics.stdev([r[k] for r in rows]) if len(rows) > 1 else 0.0 for k in _KEYS}
        return mean, sd

    mean, sd = stats(fold_scores)
    labels = sorted({label for scores in fold_scores for label in scores["per_label"]})
    per_label = {}
    for label in labels:
        label_mean, label_sd = stats([s["per_label"][label] for s in fold_scores if label in s["per_label"]])
        per_label[label] = {"mean": label_mean, "sd": label_sd}
    return {"mean": mean, "sd": sd, "per_label": per_label}


def format_fold_summary(folds: Mapping) -> str:
    """``mean ± sd`` per label (sequence labelling) or per average (classification)."""
    scores = folds.get("scores") or []
    lines = [f"n-fold: {len(scores)} folds, scores on {folds.get('scores_on', '?')}, mean ± sd"]
    per_label = folds.get("per_label")
    if per_label is not None:
        width = max([len("micro avg"), *map(len, per_label)])
        lines.append(f"{'':>{width}}  " + "  ".join(f"{k:>17}" for k in ("precision", "recall", "f1-score")))
        rows = [*((label, per_label[label]) for label in sorted(per_label)), ("micro avg", folds)]
        for name, row in rows:
            cells = "  ".join(f"{row['mean'][k]:>8.4f} ± {row['sd'][k]:<6.4f}" for k in _KEYS)
            lines.append(f"{name:>{width}}  {cells}")
    else:
        for name in folds.get("mean", {}):
            lines.append(f"{name:>10}  {folds['mean'][name]:.4f} ± {folds['sd'][name]:.4f}")
    for i, fold in enumerate(scores):
        f1 = fold["f1"] if "f1" in fold else fold.get("macro", {}).get("f1")
        mark = "  (saved)" if folds.get("kept") == i else ""
        lines.append(f"fold {i + 1}: f1 {_number(f1, '.4f')}{mark}")
    return "\n".join(lines)


def format_history(history: TrainingHistory, header: Mapping[str, str] | None = None) -> str:
    """The whole report: header lines, each run's epoch table, final scores, n-fold summary."""
    lines = [f"{key:<13}{value}" for key, value in (header or {}).items()]
    kept = history.kept
    for run in history.runs:
        lines += ["", format_run(run, history.metric, kept=run is kept and len(history.runs) > 1)]
    lines.append("(* best epoch of each run)")
    if history.folds:
        lines += ["", format_fold_summary(history.folds)]
    if history.final_scores is not None:
        lines += ["", f"final scores of the saved model on {history.final_scores_on or 'the test data'}:"]
        render = format_report if "per_label" in history.final_scores else format_cls_report
        lines.append(render(history.final_scores))
    return "\n".join(lines).rstrip() + "\n"
