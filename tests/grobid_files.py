"""Small GROBID files written by tests: sequences with chosen numbers of feature columns."""

from __future__ import annotations

from pathlib import Path


def grobid_line(token: str, n_features: int, label: str) -> str:
    """A token line with ``n_features`` columns: a lexical one, then small-vocabulary ones."""
    shape = "CAP" if token[:1].isupper() else "LOW"
    columns = [token.lower(), shape, "LINEIN", "NOPUNCT", "0", "1", "X", "Y"][:n_features]
    return " ".join([token, *columns, label])


def ragged_file(path: Path, widths: tuple[int, ...] = (5, 6), n: int = 12) -> Path:
    """Date-like sequences whose column count alternates between ``widths`` (each self-consistent)."""
    blocks = []
    for i in range(n):
        width = widths[i % len(widths)]
        rows = [("June", "I-<month>"), (str(1 + i), "I-<day>"), (str(1990 + i), "I-<year>")]
        blocks.append("\n".join(grobid_line(token, width, label) for token, label in rows))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path
