"""A submodule that names its own rate option trains at that rate, the rest at the common one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from textorch.errors import ConfigError
from textorch.models.template_emissions import TemplateEmissions
from textorch.train.config import TrainConfig
from textorch.train.trainer import adam, l1_penalties, parameter_groups


def _model() -> nn.Module:
    return nn.ModuleDict({"encoder": nn.Linear(4, 3), "templates": TemplateEmissions(10, 3)})


def test_the_template_table_gets_its_own_rate_where_one_is_set() -> None:
    model = _model()
    groups = parameter_groups(model, TrainConfig(learning_rate=1e-3, template_learning_rate=1e-4))
    assert [g["lr"] for g in groups] == [1e-3, 1e-4]
    assert groups[1]["params"] == [model["templates"].weight]
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in model["encoder"].parameters()}
    optimizer, _ = adam(model, TrainConfig(learning_rate=1e-3, template_learning_rate=1e-4), 10)
    assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 1e-4]


def test_without_a_rate_of_its_own_every_parameter_shares_one_group() -> None:
    model = _model()
    (group,) = parameter_groups(model, TrainConfig(learning_rate=1e-3))
    assert len(group["params"]) == len(list(model.parameters())) and group["lr"] == 1e-3


def test_the_table_moves_ten_times_less_at_a_tenth_of_the_rate() -> None:
    moved = {}
    for rate in (1e-3, 1e-4):
        torch.manual_seed(0)
        model = _model()
        optimizer, _ = adam(model, TrainConfig(learning_rate=1e-3, template_learning_rate=rate), 10)
        rows = torch.tensor([[[1, 2, 3]]])
        loss = model["templates"](rows).sum() + model["encoder"](torch.ones(4)).sum()
        loss.backward()
        optimizer.step()
        moved[rate] = float(model["templates"].weight.abs().max())
    assert moved[1e-3] == pytest.approx(1e-3, rel=1e-3) and moved[1e-4] == pytest.approx(1e-4, rel=1e-3)


def test_a_negative_template_rate_is_refused() -> None:
    with pytest.raises(ConfigError, match="--template-learning-rate"):
        TrainConfig(template_learning_rate=-1.0)


def test_the_template_table_carries_its_l1_penalty_in_a_crfs_scale() -> None:
    """GROBID's CRF sums its loss over the training sequences and adds rho * |w|: a step that
    averages its sequences' losses adds rho / N per sequence."""
    model = _model()
    assert l1_penalties(model, TrainConfig(), 20) == []
    ((weight, scale),) = l1_penalties(model, TrainConfig(template_l1=0.5), 20)
    assert weight is model["templates"].weight and scale == pytest.approx(0.5 / 20)
    model["templates"].weight.requires_grad_(False)  # a frozen table is never penalised
    assert l1_penalties(model, TrainConfig(template_l1=0.5), 20) == []


def test_a_negative_l1_penalty_is_refused() -> None:
    with pytest.raises(ConfigError, match="--template-l1"):
        TrainConfig(template_l1=-0.1)
    with pytest.raises(ConfigError, match="--template-only-from-tokens must be >= 0, got -5"):
        TrainConfig(template_only_from_tokens=-5)
