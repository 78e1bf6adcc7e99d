"""Learning-rate cuts on a validation plateau, replayed from the score history.

DeLFT's recurrent taggers halve Adam's rate when validation F1 has not improved for a few
epochs (``ReduceLROnPlateau``); a successor that must reach the same F1 on the same files
needs the same rule. The rate is derived from the validation scores recorded so far rather
than kept in a scheduler object, so a run resumed from a checkpoint (which keeps the history)
continues with exactly the rate an uninterrupted run would have.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

RELATIVE_THRESHOLD = 1e-4
"""A score counts as better only above ``best * (1 + this)``: ``ReduceLROnPlateau``'s default."""


def plateau_cuts(scores: Sequence[float], patience: int) -> int:
    """How many times the rate has been cut after these epoch scores (higher is better).

    The rule of ``torch.optim.lr_scheduler.ReduceLROnPlateau(mode="max")``: a cut after more
    than ``patience`` epochs in a row without improvement, after which the count restarts."""
    best = -float("inf")
    without_gain = cuts = 0
    for score in scores:
        if score > best * (1 + RELATIVE_THRESHOLD):  # -inf at first: the first score is a gain
            best, without_gain = score, 0
        else:
            without_gain += 1
            if without_gain > patience:
                cuts, without_gain = cuts + 1, 0
    return cuts


def apply_plateau_rate(optimizer: torch.optim.Optimizer, scores: Sequence[float], factor: float, patience: int) -> float:
    """Set every parameter group's rate to its initial rate times ``factor ** cuts``; returns the first group's."""
    cuts = plateau_cuts(scores, patience)
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
        group["lr"] = group["initial_lr"] * factor**cuts
    return optimizer.param_groups[0]["lr"]
