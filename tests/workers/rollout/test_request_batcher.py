"""RequestBatcher: concurrent submits become batches (window, size cap, arrival order); a failing batch fails alone."""

from __future__ import annotations

import asyncio
import threading

import pytest

from verl.workers.rollout.request_batcher import RequestBatcher


def _doubler(seen: list[list[int]]):
    def run_batch(requests: list[int]) -> list[int]:
        seen.append(list(requests))
        return [2 * r for r in requests]

    return run_batch


def test_gathered_requests_form_one_batch_in_order_off_the_event_loop():
    seen, threads = [], []

    def run_batch(requests):
        threads.append(threading.current_thread())
        return _doubler(seen)(requests)

    batcher = RequestBatcher(run_batch, max_batch_size=16, window_s=0.0)

    async def main():
        return await asyncio.gather(*[batcher.submit(i) for i in range(5)])

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]
    assert seen == [[0, 1, 2, 3, 4]] and batcher.batch_sizes == [5]
    assert threads[0] is not threading.main_thread()  # the event loop stays free while a batch runs


def test_max_batch_size_splits_in_arrival_order():
    seen = []
    batcher = RequestBatcher(_doubler(seen), max_batch_size=3)

    async def main():
        return await asyncio.gather(*[batcher.submit(i) for i in range(7)])

    assert asyncio.run(main()) == [2 * i for i in range(7)]
    assert seen == [[0, 1, 2], [3, 4, 5], [6]]


def test_the_window_gathers_requests_that_arrive_soon_after_the_first():
    seen = []
    batcher = RequestBatcher(_doubler(seen), max_batch_size=8, window_s=0.2)

    async def late(i):
        await asyncio.sleep(0.02)
        return await batcher.submit(i)

    async def main():
        return await asyncio.gather(batcher.submit(0), late(1), late(2))

    assert asyncio.run(main()) == [0, 2, 4]
    assert seen == [[0, 1, 2]]


def test_a_failing_batch_fails_its_requests_only():
    def run_batch(requests):
        if 13 in requests:
            raise RuntimeError("out of memory")
        return [r + 1 for r in requests]

    batcher = RequestBatcher(run_batch, max_batch_size=2)

    async def main():
        return await asyncio.gather(*[batcher.submit(i) for i in (13, 1, 2, 3)], return_exceptions=True)

    first, second, third, fourth = asyncio.run(main())
    assert isinstance(first, RuntimeError) and isinstance(second, RuntimeError)  # the batch [13, 1]
    assert (third, fourth) == (3, 4)


def test_a_cancelled_request_is_dropped_before_its_batch_runs():
    seen = []
    batcher = RequestBatcher(_doubler(seen), max_batch_size=8, window_s=0.05)

    async def main():
        doomed = asyncio.ensure_future(batcher.submit(99))
        kept = asyncio.ensure_future(batcher.submit(1))
        await asyncio.sleep(0)
        doomed.cancel()
        return await kept

    assert asyncio.run(main()) == 2
    assert seen == [[1]]


def test_a_batcher_belongs_to_one_event_loop():
    batcher = RequestBatcher(_doubler([]), max_batch_size=4)
    asyncio.run(batcher.submit(1))
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(batcher.submit(2))

    async def fresh(current):
        return RequestBatcher.for_running_loop(current, run_batch=_doubler([]), max_batch_size=4)

    assert asyncio.run(fresh(batcher)) is not batcher


def test_the_batch_count_carries_over_to_the_next_loops_batcher():
    """A server's startup check runs one request on a loop of its own; its /stats must still count every request."""
    seen: list[list[int]] = []

    async def send(current, values):
        batcher = RequestBatcher.for_running_loop(current, run_batch=_doubler(seen), max_batch_size=8)
        await asyncio.gather(*(batcher.submit(v) for v in values))
        return batcher

    startup = asyncio.run(send(None, [0]))
    served = asyncio.run(send(startup, list(range(1, 17))))
    assert served is not startup
    assert served.batch_sizes == [1, 8, 8] and sum(served.batch_sizes) == 17
    assert seen == [[0], list(range(1, 9)), list(range(9, 17))]


@pytest.mark.parametrize("kwargs, match", [({"max_batch_size": 0}, "max_batch_size"), ({"window_s": -1}, "window_s")])
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RequestBatcher(_doubler([]), **{"max_batch_size": 1, **kwargs})
