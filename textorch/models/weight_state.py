"""What a module's weights are known by, for values computed from them and kept (character
vectors of token types, LSTM weights in oneDNN's layout).

A parameter's version counter moves with every in-place change PyTorch records
(``load_state_dict``, ``copy_``, an unfused optimizer step), but the fused Adam step changes
weights without moving it. So the state also counts the optimizer steps taken in this process:
a post-step hook on every torch optimizer, whoever runs it, costs an integer increment per step.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

_optimizer_steps = 0


def _count_step(optimizer, args, kwargs) -> None:  # noqa: ANN001 (the hook's signature)
    global _optimizer_steps
    _optimizer_steps += 1


register_optimizer_step_post_hook(_count_step)


def weights_state(params: tuple[torch.Tensor, ...]) -> tuple | None:
    """Equal before and after only if no known change reached ``params``: optimizer steps taken
    in this process, and each parameter's storage, dtype and in-place version counter. None for
    inference tensors, which keep no version counter (nothing computed from them is reusable)."""
    if any(p.is_inference() for p in params):
        return None
    return (_optimizer_steps, tuple((p.data_ptr(), p.dtype, p._version) for p in params))
