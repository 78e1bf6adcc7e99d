"""``learning-curves.png``: training loss and validation score per epoch, one line per run.

matplotlib is imported only here and only when a plot is drawn (it takes a second or two to
import); the figure is rendered by the Agg canvas directly, without pyplot, so nothing global
(backend selection, the pyplot figure registry) is touched in the user's process.
"""

from __future__ import annotations

import io
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textorch.train.history import RunRecord, TrainingHistory

logger = logging.getLogger(__name__)


def _offsets(runs: list["RunRecord"]) -> list[int]:
    """Epoch offset of each run: a continuing run starts after the run it continues."""
    offsets, previous_end = [], 0
    for run in runs:
        start = previous_end if run.continues else 0
        offsets.append(start)
        previous_end = start + len(run.epochs)
    return offsets


def learning_curves_png(history: "TrainingHistory") -> bytes | None:
    """PNG bytes of the learning curves, or None when matplotlib is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        logger.warning("matplotlib is not installed: no learning-curves.png (pip install 'textorch[reports]')")
        return None
    runs = history.runs
    has_scores = any(e.get("valid_score") is not None for run in runs for e in run.epochs)
    panels = 2 if has_scores else 1
    figure = Figure(figsize=(7.0, 2.8 * panels), dpi=100)
    canvas = FigureCanvasAgg(figure)
    axes = figure.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
    kept = history.kept
    for run, offset in zip(runs, _offsets(runs)):
        xs = [offset + int(e["epoch"]) for e in run.epochs]
        label = run.name + (" (saved)" if run is kept and len(runs) > 1 else "")
        axes[0].plot(xs, [e["loss"] for e in run.epochs], marker="o", markersize=3, label=label)
        if has_scores:
            points = [(x, e["valid_score"]) for x, e in zip(xs, run.epochs) if e.get("valid_score") is not None]
            if points:
                line = axes[1].plot(*zip(*points), marker="o", markersize=3, label=label)[0]
                best = [(x, e["valid_score"]) for x, e in zip(xs, run.epochs)
                        if e["epoch"] == run.best_epoch and e.get("valid_score") is not None]
                if best:  # a star on the epoch whose weights were kept
                    axes[1].plot(*best[0], marker="*", markersize=12, color=line.get_color())
    axes[0].set_ylabel("training loss")
    axes[0].set_title(f"{history.task.replace('_', ' ')}: learning curves")
    if has_scores:
        axes[1].set_ylabel(f"validation {history.metric}")
    axes[-1].set_xlabel("epoch")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if len(runs) > 1:
        axes[0].legend(fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    canvas.print_png(buffer)
    return buffer.getvalue()
