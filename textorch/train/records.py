"""What a training run produces and where it stands, shared by the trainer and its checkpoints.

Kept apart from both so that checkpointing and the training loop need not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class EpochRecord:
    epoch: int
    loss: float
    valid_score: float | None
    learning_rate: float
    seconds: float
    tokens_per_s: float


@dataclass
class TrainingResult:
    history: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0
    best_score: float | None = None
    stopped_early: bool = False
    train_seconds: float = 0.0
    tokens_per_s: float = 0.0


@dataclass
class Progress:
    """Where a run stands: with the weights and optimizer, what a checkpoint needs to continue it."""

    result: TrainingResult
    epoch: int = 1
    """The epoch running (or to run next)."""
    step: int = 0
    """Optimizer steps of that epoch already done."""
    global_step: int = 0
    epochs_without_gain: int = 0
    best_state: dict | None = None
    totals: torch.Tensor | None = None
    """Loss, sequence and token sums of a resumed epoch's steps before the checkpoint."""
    total_tokens: float = 0.0
    elapsed_s: float = 0.0
    rng: list[dict[str, Any]] | None = None
    """Random states of every process, from a checkpoint, restored just before the first step."""
