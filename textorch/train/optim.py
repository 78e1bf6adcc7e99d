"""Optimizer factories for :class:`~textorch.train.trainer.Trainer` beyond plain Adam.

Fine-tuning a pre-trained transformer wants a small learning rate, warm-up (large early
updates would wreck the pre-trained weights) and linear decay to zero over the planned steps;
the freshly initialised layers on top (CRF, emissions, char encoder, feature channel) need a
far larger rate to learn anything in a few epochs, so they get their own parameter group.
"""

from __future__ import annotations

import torch
from torch import nn

from textorch.train.config import TrainConfig
from textorch.models.transformer import TransformerEmbedder

_NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")


def warmup_linear_decay(total_steps: int, warmup_steps: int):
    """Multiplier of the base rate at each step: linear rise over ``warmup_steps``, then linear fall to 0."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def _pretrained_parameter_ids(model: nn.Module) -> set[int]:
    return {id(p) for m in model.modules() if isinstance(m, TransformerEmbedder) for p in m.encoder.parameters()}


def adamw_warmup_linear(
    model: nn.Module, config: TrainConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW: the transformer at ``transformer_learning_rate``, other layers at ``learning_rate``.

    Weight decay (``weight_decay``) applies to the transformer's weight matrices only, not to
    biases and layer norms (as in BERT's own recipe). The schedule steps once per batch.
    """
    pretrained = _pretrained_parameter_ids(model)
    groups: dict[str, list[nn.Parameter]] = {"decay": [], "no_decay": [], "new": []}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        if id(parameter) not in pretrained:
            groups["new"].append(parameter)
        elif name.endswith(_NO_DECAY):
            groups["no_decay"].append(parameter)
        else:
            groups["decay"].append(parameter)
    param_groups = [
        {"params": groups["decay"], "lr": config.transformer_learning_rate, "weight_decay": config.weight_decay},
        {"params": groups["no_decay"], "lr": config.transformer_learning_rate, "weight_decay": 0.0},
        {"params": groups["new"], "lr": config.learning_rate, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW([g for g in param_groups if g["params"]])
    warmup = round(config.warmup_fraction * total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_linear_decay(total_steps, warmup))
    return optimizer, scheduler
