"""What classifying one text gives back, apart from the classifier so that the answer writers
(``cls classify``'s JSON, the server) need only this and not the class that classifies."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClsPrediction:
    labels: list[str]
    """The predicted class (single-label) or every class over its threshold (multi-label)."""
    scores: dict[str, float] = field(default_factory=dict)
    """Probability per class (softmax for single-label, sigmoid for multi-label)."""
