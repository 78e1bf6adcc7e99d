"""Micro-batching: concurrent requests to one model are answered by one forward pass.

GROBID sends many small requests (one citation, one date) from several threads. Run one by one,
each pays the per-call overhead of the network; gathered, they cost little more than one. While
requests arrive concurrently, the first request of a batch waits up to ``window_s`` for others,
the batch closes early at ``max_batch_size`` sequences, and while a batch runs the next one fills
up. A request that finds the model idle and nobody else waiting runs at once: a lone client
(GROBID on one thread) would otherwise pay the whole window on every request, for no company:
its latency would be the window rather than the model's time (docs/performance.md).

Inference runs in a worker thread (one for the whole server, shared by all models) so that the
event loop keeps accepting requests while the model computes; that is what lets batches form.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

logger = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass
class BatchStats:
    """Counters shown by ``/health`` and ``/models``: they show whether batching happens."""

    batches: int = 0
    requests: int = 0
    sequences: int = 0
    max_requests_per_batch: int = 0
    max_sequences_per_batch: int = 0
    compute_s: float = 0.0
    """Time spent in the model (the worker thread), summed over batches."""

    def record(self, n_requests: int, n_sequences: int, seconds: float) -> None:
        self.batches += 1
        self.requests += n_requests
        self.sequences += n_sequences
        self.max_requests_per_batch = max(self.max_requests_per_batch, n_requests)
        self.max_sequences_per_batch = max(self.max_sequences_per_batch, n_sequences)
        self.compute_s += seconds

    def to_json(self) -> dict[str, Any]:
        mean = self.requests / self.batches if self.batches else 0.0
        return {
            "batches": self.batches,
            "requests": self.requests,
            "sequences": self.sequences,
            "mean_requests_per_batch": round(mean, 3),
            "max_requests_per_batch": self.max_requests_per_batch,
            "max_sequences_per_batch": self.max_sequences_per_batch,
            "compute_s": round(self.compute_s, 6),
        }


@dataclass
class _Job(Generic[Item, Result]):
    items: Sequence[Item]
    future: asyncio.Future = field(repr=False)
    arrived: float = 0.0


class MicroBatcher(Generic[Item, Result]):
    """Queue of pending requests for one model and the task that turns them into batches.

    ``run`` maps a list of items (sequences) to one result per item, in order; it is called in
    ``executor`` and must be thread-safe with respect to itself only (one worker thread).
    """

    def __init__(
        self,
        run: Callable[[list[Item]], list[Result]],
        executor: Executor,
        window_s: float,
        max_batch_size: int,
    ) -> None:
        self._run = run
        self._executor = executor
        self.window_s = window_s
        self.max_batch_size = max_batch_size
        self._pending: deque[_Job] = deque()
        self._pending_items = 0
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._computing = False
        self._company = False
        """Whether, since the last batch formed, a request arrived while a batch was computing or
        while another was waiting: clients are concurrent, and waiting for more pays."""
        self.stats = BatchStats()

    def start(self) -> None:
        """Start the batching task on the running event loop (the server's lifespan calls this)."""
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._serve_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        while self._pending:
            job = self._pending.popleft()
            if not job.future.done():
                job.future.set_exception(RuntimeError("server shutting down"))

    async def submit(self, items: Sequence[Item]) -> list[Result]:
        """Results for ``items``, computed in some batch together with other requests' items."""
        if not items:
            return []
        if self._arrived is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append(_Job(items, future, loop.time()))
        self._pending_items += len(items)
        self._company = self._company or self._computing or len(self._pending) > 1
        self._arrived.set()
        return await future

    async def _serve_forever(self) -> None:
        assert self._arrived is not None
        while True:
            while not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            if self.window_s > 0 and self._company:
                await self._wait_for_more()
            jobs = self._take_batch()
            self._company = bool(self._pending)  # a batch closed by its size left others waiting
            await self._run_batch(jobs)

    async def _wait_for_more(self) -> None:
        """Wait until the batch is full or the oldest waiting request has waited ``window_s``.

        The window counts from that request's arrival, not from now: requests that queued up
        while the previous batch ran have waited already and go at once.
        """
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        deadline = self._pending[0].arrived + self.window_s
        while self._pending_items < self.max_batch_size:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _take_batch(self) -> list[_Job]:
        """Jobs from the front of the queue up to ``max_batch_size`` items (at least one job).

        With batching off (window 0) each request is a batch of its own, so the two modes can
        be compared under the same load.
        """
        jobs = [self._pending.popleft()]
        size = len(jobs[0].items)
        while self.window_s > 0 and self._pending and size + len(self._pending[0].items) <= self.max_batch_size:
            job = self._pending.popleft()
            jobs.append(job)
            size += len(job.items)
        self._pending_items -= size
        return jobs

    async def _run_batch(self, jobs: list[_Job]) -> None:
        jobs = [job for job in jobs if not job.future.cancelled()]  # client went away
        if not jobs:
            return
        items = [item for job in jobs for item in job.items]
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            results = await self._compute(items)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting request(s)
            if len(jobs) > 1:
                # One bad request must not fail the others it happened to share a batch with.
                logger.warning("batch of %d requests failed (%s); running them one by one", len(jobs), exc)
                for job in jobs:
                    await self._run_batch([job])
                return
            logger.exception("request of %d sequences failed", len(items))
            if not jobs[0].future.done():
                jobs[0].future.set_exception(exc)
            return
        self.stats.record(len(jobs), len(items), loop.time() - started)
        start = 0
        for job in jobs:
            end = start + len(job.items)
            if not job.future.done():
                job.future.set_result(results[start:end])
            start = end

    async def _compute(self, items: list) -> list:
        """``run(items)`` in the worker thread, flagged as computing meanwhile (see ``_company``)."""
        self._computing = True
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, self._run, items)
        finally:
            self._computing = False
