"""One training loop for every task, device and world size.

The loop knows nothing about labels or metrics: it asks the task data for batches and a
validation callback for a score; early stopping and "best epoch" follow that score, which in a
distributed run is computed from counts summed over all processes, so every process takes the
same decision.
"""

from __future__ import annotations

import copy
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn
from tqdm import tqdm

from textorch.config import TrainConfig
from textorch.data.batching import bucketed_batches, shard
from textorch.train.dist import DistContext

logger = logging.getLogger(__name__)


class TrainingData(Protocol):
    def lengths(self) -> list[int]: ...

    def batch(self, indices: list[int]): ...


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


OptimizerFactory = Callable[[nn.Module, TrainConfig, int], "tuple[torch.optim.Optimizer, object | None]"]
"""``(model, config, total_steps) -> (optimizer, scheduler or None)``; the scheduler steps per batch."""


def adam(model: nn.Module, config: TrainConfig, total_steps: int) -> tuple[torch.optim.Optimizer, None]:
    """DeLFT's choice for the recurrent architectures: plain Adam, constant learning rate."""
    return torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=config.learning_rate), None


class Callback(Protocol):
    """Side effects (history files, checkpoints, reports) hook in here, not into the loop."""

    def on_epoch_end(self, trainer: "Trainer", record: EpochRecord, is_best: bool) -> None: ...


class Trainer:
    """Gradient clipping, bucketed batches, early stopping on a validation score."""

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        device: torch.device,
        ctx: DistContext | None = None,
        validate: Callable[[nn.Module], float] | None = None,
        optimizer_factory: OptimizerFactory = adam,
        callbacks: list[Callback] | None = None,
    ) -> None:
        self.model = model
        self.config = config
        self.device = device
        self.ctx = ctx or DistContext()
        self.validate = validate
        self.optimizer_factory = optimizer_factory
        self.callbacks = list(callbacks or [])
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler = None

    def fit(self, data: TrainingData) -> TrainingResult:
        config, ctx = self.config, self.ctx
        lengths = data.lengths()
        steps_per_epoch = -(-len(lengths) // config.batch_size)
        self.optimizer, self.scheduler = self.optimizer_factory(self.model, config, steps_per_epoch * config.max_epoch)
        result = TrainingResult()
        best_state: dict | None = None
        epochs_without_gain = 0
        start = time.perf_counter()
        total_tokens = 0
        for epoch in range(1, config.max_epoch + 1):
            record = self._run_epoch(data, lengths, epoch)
            total_tokens += record.tokens_per_s * record.seconds
            improved = True
            if self.validate is not None:
                record.valid_score = float(self.validate(self.model))
                improved = result.best_score is None or record.valid_score > result.best_score
                if improved:
                    result.best_score, result.best_epoch = record.valid_score, epoch
                    best_state = copy.deepcopy(self.model.state_dict())
                    epochs_without_gain = 0
                else:
                    epochs_without_gain += 1
            else:
                result.best_epoch = epoch
            result.history.append(record)
            self._log_epoch(record)
            for callback in self.callbacks:
                callback.on_epoch_end(self, record, improved)
            if self.validate is not None and config.early_stop and epochs_without_gain >= config.patience:
                result.stopped_early = True
                if ctx.is_main:
                    logger.info("early stopping: no gain for %d epochs, best epoch %d", config.patience, result.best_epoch)
                break
        if best_state is not None:
            self.model.load_state_dict(best_state)
        result.train_seconds = time.perf_counter() - start
        result.tokens_per_s = total_tokens / max(sum(r.seconds for r in result.history), 1e-9)
        return result

    def _run_epoch(self, data: TrainingData, lengths: list[int], epoch: int) -> EpochRecord:
        config, ctx = self.config, self.ctx
        self.model.train()
        batches = bucketed_batches(lengths, config.batch_size, config.seed, epoch)
        bar = tqdm(
            batches,
            desc=f"epoch {epoch}/{config.max_epoch}",
            unit="batch",
            file=sys.stderr,
            disable=None if ctx.is_main else True,  # None: no bar when stderr is not a terminal
            leave=False,
            dynamic_ncols=True,
        )
        loss_sum, n_sequences, n_tokens = 0.0, 0, 0
        started = time.perf_counter()
        for step, global_batch in enumerate(bar):
            local = shard(global_batch, ctx.rank, ctx.world_size)
            batch = data.batch(local).to(self.device)
            output = self.model(batch)
            # Sum over this process's sequences divided by the *global* batch size, times the
            # world size because DDP averages gradients: N devices x b == 1 device x N*b.
            loss = output.loss.sum() * (ctx.world_size / len(global_batch))
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.clip_grad > 0:
                nn.utils.clip_grad_norm_(self.model.parameters(), config.clip_grad)
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            loss_sum += float(output.loss.detach().sum())
            n_sequences += len(local)
            n_tokens += int(batch.lengths.sum())
            if step % 10 == 0 or step == len(batches) - 1:
                elapsed = time.perf_counter() - started
                bar.set_postfix(loss=f"{loss_sum / max(n_sequences, 1):.3f}", tok_s=f"{n_tokens / max(elapsed, 1e-9):.0f}")
        bar.close()
        seconds = time.perf_counter() - started
        lr = self.optimizer.param_groups[0]["lr"]
        return EpochRecord(epoch, loss_sum / max(n_sequences, 1), None, lr, seconds, n_tokens / max(seconds, 1e-9))

    def _log_epoch(self, record: EpochRecord) -> None:
        if not self.ctx.is_main:
            return
        valid = "" if record.valid_score is None else f"  valid f1 {record.valid_score:.4f}"
        logger.info(
            "epoch %d/%d  loss %.4f%s  %.1fs  %.0f tok/s",
            record.epoch,
            self.config.max_epoch,
            record.loss,
            valid,
            record.seconds,
            record.tokens_per_s,
        )
        if math.isnan(record.loss):
            logger.warning("loss is NaN: lower the learning rate or check the data")
