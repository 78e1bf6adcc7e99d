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
from functools import partial
from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn
from tqdm import tqdm

from textorch.train.config import TrainConfig
from textorch.data.batching import bucketed_batches
from textorch.train.checkpoint import final_result, resume_progress
from textorch.train.rng_state import restore_rng
from textorch.train.dist import DistContext
from textorch.train.lr_plateau import apply_plateau_rate
from textorch.train.records import EpochRecord, Progress, TrainingResult
from textorch.train.parallel import Precision, no_sync_unless, plan_micro_batches, wrap_for_training

if TYPE_CHECKING:
    from textorch.train.checkpoint import Checkpointer, Snapshot

logger = logging.getLogger(__name__)


class TrainingData(Protocol):
    def lengths(self) -> list[int]: ...

    def batch(self, indices: list[int]): ...


OptimizerFactory = Callable[[nn.Module, TrainConfig, int], "tuple[torch.optim.Optimizer, object | None]"]
"""``(model, config, total_steps) -> (optimizer, scheduler or None)``; the scheduler steps per batch."""


def adam(model: nn.Module, config: TrainConfig, total_steps: int) -> tuple[torch.optim.Optimizer, object | None]:
    """DeLFT's choice for the recurrent architectures: plain Adam, at a constant learning rate
    unless ``config.lr_schedule`` asks for a linear fall to zero over ``total_steps``."""
    optimizer = _adam_optimizer(model, config)
    if config.lr_schedule == "linear":
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, partial(_linear_fall, total_steps=total_steps))
    return optimizer, None


def _linear_fall(step: int, total_steps: int) -> float:
    """The rate's factor after ``step`` of ``total_steps`` steps: 1 at the start, 0 at the end."""
    return max(0.0, 1.0 - step / max(total_steps, 1))


def parameter_groups(model: nn.Module, config: TrainConfig) -> list[dict]:
    """The trainable parameters as optimizer groups: one at ``config.learning_rate``, and one per
    submodule that names, in its ``rate_option`` attribute, the config field holding a rate of its
    own, where that field is set (0 or None: the common rate)."""
    own: dict[int, float] = {}
    for module in model.modules():
        rate = getattr(config, getattr(module, "rate_option", ""), None)
        if rate:
            own.update({id(p): float(rate) for p in module.parameters() if p.requires_grad})
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if id(p) not in own], "lr": config.learning_rate}]
    for rate in sorted(set(own.values())):
        groups.append({"params": [p for p in params if own.get(id(p)) == rate], "lr": rate})
    return [g for g in groups if g["params"]]


def l1_penalties(model: nn.Module, config: TrainConfig, n_sequences: int) -> list[tuple[torch.Tensor, float]]:
    """(weight, scale) of every submodule that names, in its ``l1_option`` attribute, the config
    field holding an L1 penalty in a CRF's scale (the loss summed over ``n_sequences`` training
    sequences), where that field is set: each sequence's loss then adds ``scale * |weight|``."""
    found = []
    for module in model.modules():
        penalty = getattr(config, getattr(module, "l1_option", ""), None)
        if penalty and module.weight.requires_grad:
            found.append((module.weight, float(penalty) / max(n_sequences, 1)))
    return found


def _adam_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam over the trainable parameters, with the fastest update kernel they allow."""
    groups = parameter_groups(model, config)
    params = [p for g in groups for p in g["params"]]
    # The fused kernel updates every tensor in one pass, where foreach runs one kernel per
    # operation over the list and the default one per tensor: for these models' many small
    # tensors the per-kernel overhead is most of the update. It takes floating-point tensors on
    # the CPU or CUDA only; anything else keeps foreach.
    fused = all(p.dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
                and p.device.type in ("cpu", "cuda") for p in params)
    if fused:
        return torch.optim.Adam(groups, lr=config.learning_rate, fused=True)
    return torch.optim.Adam(groups, lr=config.learning_rate, foreach=True)


class Callback(Protocol):
    """Side effects (history files, checkpoints, reports) hook in here, not into the loop."""

    def on_epoch_end(self, trainer: "Trainer", record: EpochRecord, is_best: bool) -> None: ...


class Trainer:
    """Gradient clipping, bucketed batches, early stopping on a validation score.

    In a multi-process run the model is wrapped in ``DistributedDataParallel`` for training
    only (``self.model`` stays the plain module, which is what is validated and saved), every
    process computes the same global batches from ``(seed, epoch)`` and takes its shard of
    each, and ``validate`` must return the score computed from counts summed over processes:
    the trainer checks that all processes got the same value, since they must all take the
    same early-stopping decision.

    ``checkpoints`` (:class:`~textorch.train.checkpoint.Checkpointer`) saves the whole state
    at every epoch end (and every N steps), and a final one when training ends; with
    ``resume`` it continues from the newest, so that a run killed at any point and resumed
    ends with the weights of an uninterrupted run.
    """

    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        device: torch.device,
        ctx: DistContext | None = None,
        validate: Callable[[nn.Module], float] | None = None,
        optimizer_factory: OptimizerFactory = adam,
        callbacks: list[Callback] | None = None,
        checkpoints: "Checkpointer | None" = None,
    ) -> None:
        self.model = model
        self.config = config
        self.device = device
        self.ctx = ctx or DistContext()
        self.validate = validate
        self.optimizer_factory = optimizer_factory
        self.callbacks = list(callbacks or [])
        self.checkpoints = checkpoints
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler = None
        self.l1: list[tuple[torch.Tensor, float]] = []
        """(weight, scale) of the L1 penalties (:func:`l1_penalties`), set when ``fit`` starts."""
        self.precision = Precision(config.precision, device)
        self.train_model: nn.Module = model

    def state_dict(self) -> dict:
        """What training needs besides the data to continue where it stands: the weights, the
        optimizer, the scheduler and the gradient scaler (None for the two that are absent)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "scaler": self.precision.scaler.state_dict() if self.precision.scaler is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        """Back to a :meth:`state_dict`; the optimizer and scheduler must have been built
        (:meth:`fit` builds them first). A scheduler or scaler state that is None is left alone."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.precision.scaler is not None and state.get("scaler") is not None:
            self.precision.scaler.load_state_dict(state["scaler"])

    def fit(self, data: TrainingData) -> TrainingResult:
        """Train until ``max_epoch`` or early stopping; the model ends with the best epoch's weights.

        With a checkpointer that resumes, training continues from its newest checkpoint (a
        ``final`` one returns its result without training).
        """
        config, ctx = self.config, self.ctx
        lengths = data.lengths()
        steps_per_epoch = -(-len(lengths) // config.batch_size)
        self.optimizer, self.scheduler = self.optimizer_factory(self.model, config, steps_per_epoch * config.max_epoch)
        self.l1 = l1_penalties(self.model, config, len(lengths))
        progress = Progress(TrainingResult())
        snapshot = self.checkpoints.restore(ctx) if self.checkpoints is not None else None
        if snapshot is not None:
            if snapshot.complete:
                return self._finished(snapshot)
            trainer_state, progress = resume_progress(snapshot, ctx)
            self.load_state_dict(trainer_state)
            if ctx.is_main:
                logger.info("resuming from %s: epoch %d, step %d", snapshot.path, progress.epoch, progress.step)
        self.train_model = wrap_for_training(self.model, ctx, self.device, lambda: self._probe(data, lengths))
        if progress.rng is not None:  # after the probe above, which may draw random numbers
            restore_rng(progress.rng[ctx.rank], self.device)
            progress.rng = None
        start = time.perf_counter()
        for epoch in range(progress.epoch, config.max_epoch + 1):
            record = self._run_epoch(data, lengths, epoch, progress)
            progress.total_tokens += record.tokens_per_s * record.seconds
            stop = self._end_of_epoch(record, progress)
            progress.epoch, progress.step = epoch + 1, 0
            progress.elapsed_s += time.perf_counter() - start
            start = time.perf_counter()
            if stop:
                break
            if self.checkpoints is not None and epoch < config.max_epoch:
                self.checkpoints.save(ctx, self.device, self.state_dict(), progress)
        result = progress.result
        if self.validate is not None:
            self._judge_validation(progress)
        if progress.best_state is not None:
            self.model.load_state_dict(progress.best_state)
        # The last step's gradients are of no use to a trained model and weigh as much as its
        # weights: freed here, they are not held through the export and tagging that follow.
        self.model.zero_grad(set_to_none=True)
        self.train_model = self.model  # drop the DDP wrapper: saving and inference use the plain module
        result.train_seconds = progress.elapsed_s + time.perf_counter() - start
        result.tokens_per_s = progress.total_tokens / max(sum(r.seconds for r in result.history), 1e-9)
        if self.checkpoints is not None:
            self.checkpoints.save_final(ctx, self.model.state_dict(), result)
        return result

    def _judge_validation(self, progress: Progress) -> None:
        """Keep no epoch that validation cannot tell apart, and say when the kept one scores 0."""
        result, main = progress.result, self.ctx.is_main
        if not result.history:  # no epoch ran (a resumed run past its last epoch)
            return
        if _flat(result.history):
            # Every epoch scored the same: the validation data cannot tell them apart (a handful of
            # sequences, or a score of 0 throughout), so it picks none: the last epoch stays.
            result.best_epoch = result.history[-1].epoch
            progress.best_state = None
            if main and len(result.history) > 1:
                logger.warning("the validation score was %.4f at every one of %d epochs: it cannot tell epochs apart, "
                               "so the last epoch is kept (more validation data, or --early-stop false, avoids this)",
                               result.history[0].valid_score, len(result.history))
        kept = next(r for r in result.history if r.epoch == result.best_epoch)
        if main and kept.valid_score == 0:
            logger.warning("the kept model (epoch %d) scores 0 on the validation data: it finds none of its "
                           "entities or classes; more epochs, more data or another architecture may", kept.epoch)

    def _end_of_epoch(self, record: EpochRecord, progress: Progress) -> bool:
        """Validation, best weights, callbacks and the early-stopping decision (True: stop)."""
        result, config = progress.result, self.config
        improved = True
        if self.validate is not None:
            record.valid_score = self._agreed(float(self.validate(self.model)))
            improved = result.best_score is None or record.valid_score > result.best_score
            if improved:
                result.best_score, result.best_epoch = record.valid_score, record.epoch
                progress.best_state = copy.deepcopy(self.model.state_dict())
                progress.epochs_without_gain = 0
            else:
                progress.epochs_without_gain += 1
            if self.scheduler is None and config.lr_decay < 1.0:
                scores = [r.valid_score for r in result.history] + [record.valid_score]
                apply_plateau_rate(self.optimizer, scores, config.lr_decay, config.lr_decay_patience)
        else:
            result.best_epoch = record.epoch
        result.history.append(record)
        self._log_epoch(record)
        for callback in self.callbacks:
            callback.on_epoch_end(self, record, improved)
        stop = (self.validate is not None and config.early_stop and progress.epochs_without_gain >= config.patience
                and not _flat(result.history))  # a flat line from the start is no plateau to stop on
        if stop:
            result.stopped_early = True
            if self.ctx.is_main:
                logger.info("early stopping: no gain for %d epochs, best epoch %d", config.patience, result.best_epoch)
        return stop

    def _finished(self, snapshot: "Snapshot") -> TrainingResult:
        """A run whose training had ended: its final weights and result, no training."""
        self.model.load_state_dict(snapshot.state["model"])
        if self.ctx.is_main:
            logger.info("training had already finished (%s): using its final weights", snapshot.path)
        return final_result(snapshot)

    def _run_epoch(self, data: TrainingData, lengths: list[int], epoch: int, progress: Progress) -> EpochRecord:
        config, ctx = self.config, self.ctx
        self.train_model.train()
        # Every process derives the same global batches from (seed, epoch): a new order each
        # epoch (what DistributedSampler.set_epoch gives) and no communication needed. A
        # resumed epoch skips the steps its checkpoint had done.
        batches = bucketed_batches(lengths, config.batch_size, config.seed, epoch, config.bucket_batches)
        first = progress.step
        bar = tqdm(
            batches[first:],
            desc=f"epoch {epoch}/{config.max_epoch}",
            unit="batch",
            initial=first,
            total=len(batches),
            file=sys.stderr,
            disable=None if ctx.shows_progress else True,  # None: no bar when stderr is not a terminal
            leave=False,
            dynamic_ncols=True,
        )
        # loss sum, sequences, tokens (this process), carried over from a checkpoint mid-epoch
        totals = progress.totals if first > 0 and progress.totals is not None else torch.zeros(3, dtype=torch.float64)
        progress.totals = None
        started = time.perf_counter()
        for step, global_batch in enumerate(bar, start=first):
            self._step(data, global_batch, totals)
            progress.step, progress.global_step = step + 1, progress.global_step + 1
            if step % 10 == 0 or step == len(batches) - 1:
                elapsed = time.perf_counter() - started
                loss_sum, n_sequences, n_tokens = totals.tolist()
                bar.set_postfix(loss=f"{loss_sum / max(n_sequences, 1):.3f}", tok_s=f"{n_tokens / max(elapsed, 1e-9):.0f}")
            if self.checkpoints is not None and step < len(batches) - 1 and self.checkpoints.due(progress.global_step):
                self.checkpoints.save(ctx, self.device, self.state_dict(), progress, totals)
        bar.close()
        seconds = time.perf_counter() - started
        loss_sum, n_sequences, n_tokens = ctx.all_reduce_sum(totals.to(self.device)).tolist()
        lr = self.optimizer.param_groups[0]["lr"]
        return EpochRecord(epoch, loss_sum / max(n_sequences, 1), None, lr, seconds, n_tokens / max(seconds, 1e-9))

    def _step(self, data: TrainingData, global_batch: list[int], totals: torch.Tensor) -> None:
        """One optimizer step over one global batch, in ``grad_accum`` micro-batches."""
        ctx, precision = self.ctx, self.precision
        pieces = plan_micro_batches(global_batch, ctx, self.config.grad_accum)
        self.optimizer.zero_grad(set_to_none=True)
        for k, local in enumerate(pieces):
            # An empty shard still runs forward/backward (on one sequence, weight 0) so that
            # this process takes part in the gradient all-reduce the others are waiting in.
            stand_in = not local
            batch = data.batch(local or global_batch[:1]).to(self.device)
            with no_sync_unless(self.train_model, sync=k == len(pieces) - 1):
                with precision.autocast():
                    output = self.train_model(batch)
                # Sum over this process's sequences divided by the *global* batch size, times
                # the world size because DDP averages gradients: N devices x b == 1 device x N*b,
                # and K micro-batches add up to the gradient of the whole batch.
                weight = 0.0 if stand_in else ctx.world_size / len(global_batch)
                loss = output.loss.float().sum()
                if self.l1 and not stand_in:  # each sequence's share of the L1 penalties
                    loss = loss + len(local) * sum(scale * w.abs().sum() for w, scale in self.l1)
                precision.backward(loss * weight)
            if not stand_in:
                totals += torch.tensor([float(output.loss.detach().sum()), len(local), int(batch.lengths.sum())], dtype=torch.float64)
        precision.step(self.optimizer, self.model, self.config)
        if self.scheduler is not None:
            self.scheduler.step()

    def _probe(self, data: TrainingData, lengths: list[int]) -> None:
        """One forward/backward pass of the plain model (see :func:`wrap_for_training`)."""
        first = bucketed_batches(lengths, self.config.batch_size, self.config.seed, 1, self.config.bucket_batches)[0]
        local = plan_micro_batches(first, self.ctx, self.config.grad_accum)[0] or first[:1]
        with self.precision.autocast():
            output = self.model(data.batch(local).to(self.device))
        output.loss.float().sum().backward()

    def _agreed(self, score: float) -> float:
        """``score``, after checking that every process computed the same one."""
        if not self.ctx.enabled:
            return score
        both = self.ctx.all_reduce_sum(torch.tensor([score, score * score], dtype=torch.float64, device=self.device))
        n = self.ctx.world_size
        mean, mean_sq = float(both[0]) / n, float(both[1]) / n
        if mean_sq - mean * mean > 1e-12 * max(1.0, mean_sq):
            raise RuntimeError(
                "validation scores differ across processes: the validate callback must reduce its "
                "counts over all processes (see textorch.train.dist_eval) before computing a score"
            )
        return score

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


def _flat(history: list[EpochRecord]) -> bool:
    """Whether every epoch so far got the same validation score."""
    return len({record.valid_score for record in history}) <= 1
