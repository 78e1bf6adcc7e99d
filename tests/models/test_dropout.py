"""The tagger's dropout: the expectation kept in training, the identity in eval."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_fast_dropout_keeps_the_expectation_and_is_identity_in_eval(p: float) -> None:
    from textorch.models.tagger import FastDropout

    torch.manual_seed(0)
    dropout = FastDropout(p)
    x = torch.ones(201, 299, requires_grad=True)  # not a multiple of 8 elements
    y = dropout.train()(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - (1 - p)) < 0.01
    flips = (y != 0).float().flatten()
    for lag in (1, 7, 8, 64):  # neighbours (bits of one 64-bit draw too) are independent
        assert abs(torch.corrcoef(torch.stack([flips[:-lag], flips[lag:]]))[0, 1].item()) < 0.02
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))
    assert abs(y.mean().item() - 1.0) < 0.02
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() / (1 - p))
    assert dropout.eval()(x) is x
