"""The few DDP- and precision-specific pieces of training, kept out of the loop body.

Wrap (with a probe for parameters the forward pass never uses), micro-batch planning for
data parallelism plus gradient accumulation, and the autocast / gradient-scaler pair.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from textorch.train.config import TrainConfig
from textorch.data.batching import shard
from textorch.errors import ConfigError
from textorch.runtime.precision import warn_without_native_bf16
from textorch.train.dist import DistContext

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def plan_micro_batches(global_batch: list[int], ctx: DistContext, grad_accum: int) -> list[list[int]]:
    """This process's pieces of one global batch, one per micro-batch.

    The global batch is cut into ``grad_accum`` contiguous micro-batches, and each of those
    into ``world_size`` contiguous shards (:func:`~textorch.data.batching.shard`: the first
    ``len % world_size`` ranks take one more). A shard may be empty when a micro-batch has
    fewer sequences than there are processes; the trainer then runs a zero-weighted stand-in
    so this process still joins the gradient all-reduce.
    """
    return [shard(shard(global_batch, k, grad_accum), ctx.rank, ctx.world_size) for k in range(grad_accum)]


def wrap_for_training(model: nn.Module, ctx: DistContext, device: torch.device, probe: Callable[[], Any]) -> nn.Module:
    """``DistributedDataParallel`` around ``model`` in a multi-process run, else ``model`` itself.

    DDP fails at the second step when some parameter never receives a gradient (a
    transformer's unused pooler, say) unless told to look for such parameters, which costs
    a graph traversal per step and a warning when there are none. ``probe`` runs one
    forward/backward pass without DDP (random state restored, gradients dropped), and the
    processes agree on whether any parameter stayed without gradient.
    """
    if not ctx.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        probe()
    unused = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    model.zero_grad(set_to_none=True)
    flag = ctx.all_reduce_sum(torch.tensor([float(bool(unused))], device=device))
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=bool(flag.item() > 0))


def no_sync_unless(model: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
    """Skip DDP's gradient all-reduce on all but the last micro-batch of a step."""
    if sync or not hasattr(model, "no_sync"):
        return contextlib.nullcontext()
    return model.no_sync()


class Precision:
    """Autocast for ``bf16``/``fp16`` and, for ``fp16``, the gradient scaler it needs."""

    def __init__(self, name: str, device: torch.device) -> None:
        if name == "fp16" and device.type != "cuda":
            raise ConfigError("--precision fp16 needs a CUDA device; on CPU use bf16 or fp32")
        self.name = name
        self.device = device
        if name == "bf16":
            warn_without_native_bf16(device)
        self.scaler = torch.amp.GradScaler("cuda") if name == "fp16" else None

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=_DTYPES[self.name])

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, model: nn.Module, config: TrainConfig) -> None:
        """Clip (on unscaled gradients) and step; fp16 skips steps whose gradients overflowed."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        if config.clip_grad > 0:
            nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad)
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
