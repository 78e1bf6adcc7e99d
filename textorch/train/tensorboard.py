"""Optional TensorBoard logging: a trainer callback writing one scalar set per epoch.

``torch.utils.tensorboard`` needs the separate ``tensorboard`` package (the ``tensorboard``
extra of textorch); asking for TensorBoard logging without it is a configuration error,
raised before the first epoch rather than after a long run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from textorch.errors import ConfigError

if TYPE_CHECKING:
    from textorch.train.trainer import EpochRecord, Trainer


def _summary_writer_class() -> Callable[..., Any]:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError(
            "--tensorboard needs the tensorboard package: pip install 'textorch[tensorboard]' (or pip install tensorboard)"
        ) from None
    return SummaryWriter


class TensorBoardLogger:
    """Writes loss, validation score, learning rate and throughput under ``log_dir`` per epoch.

    Only the main process writes (all processes see the same numbers). Events are flushed at
    every epoch so that a running TensorBoard shows them at once; the writer is created on the
    first epoch so that building the callback costs nothing.
    """

    def __init__(self, log_dir: str | Path, metric: str = "score",
                 writer_factory: Callable[..., Any] | None = None) -> None:
        self.log_dir = str(log_dir)
        self.metric = metric
        self._factory = writer_factory or _summary_writer_class()
        self._writer: Any = None

    def on_epoch_end(self, trainer: "Trainer", record: "EpochRecord", is_best: bool) -> None:
        if not trainer.ctx.is_main:
            return
        if self._writer is None:
            self._writer = self._factory(log_dir=self.log_dir)
        step = record.epoch
        self._writer.add_scalar("train/loss", record.loss, step)
        if record.valid_score is not None:
            self._writer.add_scalar(f"valid/{self.metric}", record.valid_score, step)
        self._writer.add_scalar("train/learning_rate", record.learning_rate, step)
        self._writer.add_scalar("train/tokens_per_s", record.tokens_per_s, step)
        self._writer.add_scalar("train/epoch_seconds", record.seconds, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def tensorboard_callbacks(log_dir: str | None, metric: str, run: str | None = None) -> list[TensorBoardLogger]:
    """The callbacks for a ``tensorboard_dir`` setting: none without one, else one logger
    (in a sub-folder per run when a training has several, e.g. one per fold)."""
    if not log_dir:
        return []
    return [TensorBoardLogger(Path(log_dir) / run if run else log_dir, metric)]
