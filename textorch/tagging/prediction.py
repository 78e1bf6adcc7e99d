"""What tagging one sequence gives back, apart from the labeler so that the answer writers
(JSON, files, the server) need only this and not the class that tags."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Prediction:
    """Labels (IOB2) and per-token confidence for one sequence."""

    labels: list[str]
    scores: list[float] | None
    """Posterior probability of each label; None when tagged with ``with_scores=False``."""
