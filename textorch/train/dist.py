"""Process-group facts, read once from the environment set by ``torchrun`` / SLURM.

With one process everything here is a no-op, so the trainer and evaluator run the same code
on a laptop CPU, one GPU or many.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1 and torch_dist.is_available() and torch_dist.is_initialized()

    def barrier(self) -> None:
        if self.enabled:
            torch_dist.barrier()

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum a tensor over all processes (in place, and returned); identity with one process."""
        if self.enabled:
            torch_dist.all_reduce(tensor, op=torch_dist.ReduceOp.SUM)
        return tensor


def context_from_env() -> DistContext:
    """Rank and world size from torchrun's variables, falling back to SLURM's, else single."""
    env = os.environ
    if "WORLD_SIZE" in env and "RANK" in env:
        return DistContext(int(env["RANK"]), int(env.get("LOCAL_RANK", 0)), int(env["WORLD_SIZE"]))
    if "SLURM_NTASKS" in env and "SLURM_PROCID" in env and int(env["SLURM_NTASKS"]) > 1:
        return DistContext(int(env["SLURM_PROCID"]), int(env.get("SLURM_LOCALID", 0)), int(env["SLURM_NTASKS"]))
    return DistContext()


def resolve_device(requested: str, ctx: DistContext) -> torch.device:
    """``auto`` picks CUDA when present; each process takes the GPU of its local rank."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        if not torch.cuda.is_available():
            from textorch.errors import ConfigError

            raise ConfigError("--device cuda: no CUDA device is available (use --device cpu or auto)")
        return torch.device("cuda", ctx.local_rank % torch.cuda.device_count())
    return torch.device("cpu")
