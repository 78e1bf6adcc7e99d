"""What the trainer optimises for classification: the weighted loss, class weights, the BERT optimizer.

Class weights live here, not in the network: they shape training only and are not saved with
the weights (a non-persistent buffer), so a model directory does not depend on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from textorch.train.config import TrainConfig
from textorch.errors import ConfigError
from textorch.models.classifiers import TransformerClassifierNet


@dataclass
class ClsOutput:
    loss: torch.Tensor  # (B,)
    logits: torch.Tensor  # (B, C)


class ClassificationObjective(nn.Module):
    """A network plus its weighted loss: what the trainer optimises (class weights are not saved)."""

    def __init__(self, network: nn.Module, multi_label: bool, class_weights: torch.Tensor | None) -> None:
        super().__init__()
        self.network = network
        self.multi_label = multi_label
        self.register_buffer("class_weights", class_weights, persistent=False)

    def forward(self, batch) -> ClsOutput:
        logits = self.network(batch).float()
        if self.multi_label:
            loss = F.binary_cross_entropy_with_logits(logits, batch.targets, pos_weight=self.class_weights, reduction="none").mean(dim=-1)
        else:
            loss = F.cross_entropy(logits, batch.targets, weight=self.class_weights, reduction="none")
        return ClsOutput(loss, logits)


def resolve_class_weights(spec: str | None, classes: list[str], multi_label: bool, targets: np.ndarray) -> torch.Tensor | None:
    """Per-class loss weights (single-label) or positive-example weights (multi-label).

    ``balanced`` gives ``n / (C * count)`` per class (scikit-learn's rule), or ``negatives /
    positives`` per class for multi-label; ``C=W,...`` sets some classes, the others stay 1.
    """
    spec = spec or ("none" if multi_label else "balanced")
    if spec == "none":
        return None
    c = len(classes)
    if spec == "balanced":
        if multi_label:
            positives = targets.sum(axis=0)
            weights = np.where(positives > 0, (len(targets) - positives) / np.maximum(positives, 1), 1.0)
        else:
            counts = np.bincount(targets, minlength=c)
            weights = np.where(counts > 0, len(targets) / (c * np.maximum(counts, 1)), 1.0)
        return torch.tensor(weights, dtype=torch.float32)
    weights = np.ones(c)
    for item in spec.split(","):
        name, sep, value = item.strip().rpartition("=")
        if not sep or name not in classes:
            raise ConfigError(f"--class-weights {spec!r}: expected balanced, none or CLASS=WEIGHT,... with classes: {', '.join(classes)}")
        try:
            weights[classes.index(name)] = float(value)
        except ValueError:
            raise ConfigError(f"--class-weights: {value!r} is not a number") from None
    return torch.tensor(weights, dtype=torch.float32)


def transformer_optimizer(model: nn.Module, config: TrainConfig, total_steps: int):
    """AdamW, warm-up then linear decay: the encoder at ``transformer_learning_rate``, the output layer at ``learning_rate``."""
    from textorch.train.optim import warmup_linear_decay

    encoder = {id(p) for m in model.modules() if isinstance(m, TransformerClassifierNet) for p in m.encoder.parameters()}
    groups: dict[str, list] = {"decay": [], "no_decay": [], "new": []}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            key = "new" if id(parameter) not in encoder else ("no_decay" if "bias" in name or "norm" in name.lower() else "decay")
            groups[key].append(parameter)
    param_groups = [
        {"params": groups["decay"], "lr": config.transformer_learning_rate, "weight_decay": config.weight_decay},
        {"params": groups["no_decay"], "lr": config.transformer_learning_rate, "weight_decay": 0.0},
        {"params": groups["new"], "lr": config.learning_rate, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW([g for g in param_groups if g["params"]])
    schedule = warmup_linear_decay(total_steps, round(config.warmup_fraction * total_steps))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
