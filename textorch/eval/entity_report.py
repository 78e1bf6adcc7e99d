"""Plain-text report of entity-level scores.

The layout is seqeval's ``classification_report`` (same columns, widths and average rows),
so that logs from textorch read like those of DeLFT and can be diffed against them.
"""

from __future__ import annotations

from collections.abc import Mapping

_HEADERS = ("precision", "recall", "f1-score", "support")
_AVERAGES = ("micro avg", "macro avg", "weighted avg")


def _weighted_mean(values: list[float], weights: list[int]) -> float:
    """Mean weighted by support; 0.0 with no gold entity at all, like seqeval's default."""
    total = sum(weights)
    if not total:
        return 0.0
    return sum(v * w for v, w in zip(values, weights)) / total


def _mean(values: list[float]) -> float:
    """Unweighted mean; 0.0 with no label (seqeval would give NaN or fail there)."""
    return sum(values) / len(values) if values else 0.0


def _average_rows(scores: Mapping) -> list[tuple[str, float, float, float, int]]:
    """Micro from the summed counts (already in ``scores``), macro/weighted from the rows.

    Macro and weighted averages are recomputed from the per-label scores, never from
    counts, because that is their definition (and seqeval's).
    """
    per_label = scores["per_label"]
    rows = [per_label[label] for label in sorted(per_label)]
    supports = [row["support"] for row in rows]
    support = sum(supports)
    keys = ("precision", "recall", "f1")
    macro = [_mean([row[key] for row in rows]) for key in keys]
    weighted = [_weighted_mean([row[key] for row in rows], supports) for key in keys]
    micro = [scores[key] for key in keys]
    return [
        (name, *values, support)
        for name, values in zip(_AVERAGES, (micro, macro, weighted))
    ]


def format_report(scores: Mapping, digits: int = 4) -> str:
    """Render :meth:`EntityCounts.scores` output as an aligned table.

    One row per label (sorted), a blank line, then the micro, macro and weighted average
    rows. Column widths follow seqeval so that the two reports are byte-identical for the
    same data and ``digits``.
    """
    per_label = scores["per_label"]
    labels = sorted(per_label)
    width = max([len(_AVERAGES[-1]), digits, *map(len, labels)])
    head = "{:>{width}s} " + " {:>9}" * len(_HEADERS)
    row_format = "{:>{width}s} " + " {:>9.{digits}f}" * 3 + " {:>9}"

    def row(name: str, precision: float, recall: float, f1: float, support: int) -> str:
        return row_format.format(name, precision, recall, f1, support, width=width, digits=digits)

    lines = [head.format("", *_HEADERS, width=width), ""]
    for label in labels:
        values = per_label[label]
        lines.append(
            row(label, values["precision"], values["recall"], values["f1"], values["support"])
        )
    lines.append("")
    lines += [row(*average) for average in _average_rows(scores)]
    lines.append("")
    return "\n".join(lines)
