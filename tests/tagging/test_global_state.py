"""Training and tagging through the library leave the process as they found it: no hook on
every optimizer of the process, the garbage collector as it was."""

from __future__ import annotations

import gc
from pathlib import Path

import torch
from torch.optim import optimizer as torch_optimizer

from textorch.data.corpus import TokenSequence
from textorch.tagging.training import train_sequence_labeler


def _global_optimizer_hooks() -> list:
    return [*torch_optimizer._global_optimizer_pre_hooks.values(), *torch_optimizer._global_optimizer_post_hooks.values()]


def test_training_and_tagging_leave_optimizer_hooks_and_the_collector_as_they_were(tiny_conll: Path) -> None:
    # textorch's modules are imported by now (this module's imports, and the test session's)
    assert not [hook for hook in _global_optimizer_hooks() if getattr(hook, "__module__", "").startswith("textorch")]
    hooks_before = _global_optimizer_hooks()
    for collector_on in (True, False):
        was_enabled = gc.isenabled()
        gc.enable() if collector_on else gc.disable()
        try:
            labeler = train_sequence_labeler(tiny_conll, max_epoch=1, word_hidden=8, char_hidden=4)
            assert gc.isenabled() is collector_on
            texts = [TokenSequence("John lives in Paris .".split()), TokenSequence(["Rome"])]
            labeler.predict(texts[:1])
            labeler.predict(texts, batch_size=1)
            labeler.evaluate(tiny_conll)
            assert gc.isenabled() is collector_on
        finally:
            gc.enable() if was_enabled else gc.disable()
    assert _global_optimizer_hooks() == hooks_before
    assert isinstance(labeler.model, torch.nn.Module)
