"""The micro-batcher alone, with a fake model: how batches form, split and fail."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from textorch.serve.batcher import MicroBatcher


class FakeModel:
    """Doubles numbers and remembers the batches it was given."""

    def __init__(self, delay_s: float = 0.0, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.delay_s = delay_s
        self.fail_on = fail_on

    def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        time.sleep(self.delay_s)
        if self.fail_on in items:
            raise ValueError(f"cannot take {self.fail_on}")
        return [2 * item for item in items]


async def _submit_all(batcher: MicroBatcher, requests: list[list[int]], stagger_s: float | list[float] = 0.0) -> list:
    """Results of ``requests`` submitted concurrently, ``stagger_s`` apart (one gap for all, or one
    after each request)."""
    gaps = stagger_s if isinstance(stagger_s, list) else [stagger_s] * len(requests)
    batcher.start()
    try:
        tasks = []
        for request, gap in zip(requests, gaps + [0.0] * len(requests)):
            tasks.append(asyncio.create_task(batcher.submit(request)))
            if gap:
                await asyncio.sleep(gap)
        return await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await batcher.stop()


@pytest.fixture
def executor():
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def test_requests_arriving_together_share_one_batch_and_get_their_own_results(executor: ThreadPoolExecutor) -> None:
    model = FakeModel()
    batcher = MicroBatcher(model, executor, window_s=0.05, max_batch_size=100)
    results = asyncio.run(_submit_all(batcher, [[1], [2, 3], [4], []]))
    assert results == [[2], [4, 6], [8], []]
    assert model.batches == [[1, 2, 3, 4]]  # the empty request never reaches the model
    assert batcher.stats.to_json() | {"compute_s": 0} == {
        "batches": 1, "requests": 3, "sequences": 4, "mean_requests_per_batch": 3.0,
        "max_requests_per_batch": 3, "max_sequences_per_batch": 4, "compute_s": 0,
    }


def test_a_full_batch_closes_early_and_requests_are_never_split(executor: ThreadPoolExecutor) -> None:
    model = FakeModel()
    batcher = MicroBatcher(model, executor, window_s=5.0, max_batch_size=4)
    started = time.perf_counter()
    requests = [[1, 2], [3], [4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14]]
    results = asyncio.run(_submit_all(batcher, requests))
    # the 5 s window never ran out: every batch was closed by its size
    assert time.perf_counter() - started < 4.0
    assert results == [[2 * i for i in request] for request in requests]
    # [4, 5] would overflow the first batch, so it opens the next; an oversized request runs alone
    assert model.batches == [[1, 2, 3], [4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14]]


def test_window_zero_runs_one_request_per_batch(executor: ThreadPoolExecutor) -> None:
    model = FakeModel()
    batcher = MicroBatcher(model, executor, window_s=0.0, max_batch_size=100)
    results = asyncio.run(_submit_all(batcher, [[1], [2], [3]]))
    assert results == [[2], [4], [6]]
    assert model.batches == [[1], [2], [3]]
    assert batcher.stats.max_requests_per_batch == 1


def test_requests_queued_during_a_batch_form_the_next_one(executor: ThreadPoolExecutor) -> None:
    model = FakeModel(delay_s=0.5)
    batcher = MicroBatcher(model, executor, window_s=0.01, max_batch_size=100)
    results = asyncio.run(_submit_all(batcher, [[1], [2], [3], [4]], stagger_s=0.1))
    assert results == [[2], [4], [6], [8]]
    # [1] found the model idle and ran at once; 2, 3 and 4 came while it ran (500 ms) and, having
    # waited longer than the window already, went together at once
    assert model.batches == [[1], [2, 3, 4]]


def test_a_request_finding_the_model_idle_and_nobody_waiting_does_not_wait_the_window(
    executor: ThreadPoolExecutor,
) -> None:
    model = FakeModel()
    batcher = MicroBatcher(model, executor, window_s=5.0, max_batch_size=100)

    async def one_client() -> list:
        batcher.start()
        try:
            return [await batcher.submit([i]) for i in range(3)]  # each after the last was answered
        finally:
            await batcher.stop()

    started = time.perf_counter()
    assert asyncio.run(one_client()) == [[0], [2], [4]]
    assert time.perf_counter() - started < 2.5  # three 5 s windows would take 15 s
    assert model.batches == [[0], [1], [2]]


def test_once_requests_overlap_a_batch_waits_the_window_for_more(executor: ThreadPoolExecutor) -> None:
    model = FakeModel(delay_s=0.3)
    batcher = MicroBatcher(model, executor, window_s=0.4, max_batch_size=100)
    # [1] runs at once (idle model); [2] comes while it computes, so concurrency is seen: its batch
    # waits out the window (from [2]'s arrival at 0.1 s to 0.5 s) and [3], at 0.35 s, joins it
    results = asyncio.run(_submit_all(batcher, [[1], [2], [3]], stagger_s=[0.1, 0.25]))
    assert results == [[2], [4], [6]]
    assert model.batches == [[1], [2, 3]]


def test_a_failing_request_does_not_fail_its_batch_mates(executor: ThreadPoolExecutor) -> None:
    model = FakeModel(delay_s=0.4, fail_on=2)
    batcher = MicroBatcher(model, executor, window_s=0.01, max_batch_size=100)
    results = asyncio.run(_submit_all(batcher, [[1], [2], [3]], stagger_s=0.1))
    assert results[0] == [2] and results[2] == [6]
    assert isinstance(results[1], ValueError) and str(results[1]) == "cannot take 2"
    # [2, 3] failed together, then each ran alone
    assert model.batches == [[1], [2, 3], [2], [3]]
    assert batcher.stats.batches == 2  # only successful batches are counted
