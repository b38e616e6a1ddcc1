"""`RequestBatcher`: concurrent ``await submit(request)`` calls gathered into batches for one batch function.

A sampler decodes a batch of rows for about the price of one row, so per-request calls from an agent loop's many
coroutines are worth batching: the first request that finds the batcher idle starts a drain task, which waits
``window_s`` for others to arrive (``window_s=0`` still yields once, so every coroutine already scheduled -- e.g.
all of one ``asyncio.gather`` -- joins), takes up to ``max_batch_size`` requests in arrival order, and runs
``run_batch`` on them in a worker thread, keeping the event loop free for tool calls and new arrivals meanwhile.
Requests that arrive during a decode form the next batch. One drain task per batcher runs batches one after the
other, in arrival order.

``run_batch(requests) -> results`` returns one result per request, in order, or raises: an exception fails every
request of that batch (it cannot be attributed; per-request checks belong before `submit`). A request whose caller
was cancelled is dropped if its batch has not started, and its result discarded otherwise.

A batcher belongs to the event loop it was first used on (asyncio futures do); use `for_running_loop` to get one for
the current loop. The batcher it replaces hands on its ``batch_sizes``, so an engine's count covers every loop it
served (a server's startup check runs on a loop of its own before the server's loop takes over).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

__all__ = ["RequestBatcher"]

Req = TypeVar("Req")
Res = TypeVar("Res")


class RequestBatcher(Generic[Req, Res]):
    """Batches ``submit`` calls of one event loop for ``run_batch`` (see the module docstring).

    Args:
        run_batch: one result per request, in order; runs in ``executor``'s thread.
        max_batch_size: requests per call of ``run_batch`` at most.
        window_s: seconds the first request of a batch waits for others.
        executor: where ``run_batch`` runs (None: the loop's default thread pool).
    """

    def __init__(
        self,
        run_batch: Callable[[list[Req]], Sequence[Res]],
        max_batch_size: int,
        window_s: float = 0.0,
        executor: Executor | None = None,
    ):
        if max_batch_size < 1:
            raise ValueError(f"RequestBatcher: max_batch_size must be >= 1, got {max_batch_size}")
        if window_s < 0:
            raise ValueError(f"RequestBatcher: window_s must be >= 0, got {window_s}")
        self.run_batch = run_batch
        self.max_batch_size = int(max_batch_size)
        self.window_s = float(window_s)
        self.executor = executor
        self.loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[tuple[Req, asyncio.Future]] = []
        self._drainer: asyncio.Task | None = None
        self.batch_sizes: list[int] = []  # the size of every batch started so far (for tests and metrics)

    @classmethod
    def for_running_loop(cls, current: RequestBatcher | None, **kwargs: Any) -> RequestBatcher:
        """``current`` if it belongs to the running event loop, else a new batcher built from ``kwargs`` that goes on
        appending to ``current``'s ``batch_sizes``."""
        loop = asyncio.get_running_loop()
        if current is not None and current.loop is loop:
            return current
        batcher = cls(**kwargs)
        batcher.loop = loop
        if current is not None:
            batcher.batch_sizes = current.batch_sizes
        return batcher

    async def submit(self, request: Req) -> Res:
        """The result of ``request`` once its batch has run."""
        loop = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = loop
        elif self.loop is not loop:
            raise RuntimeError("RequestBatcher.submit: this batcher belongs to another event loop")
        future = loop.create_future()
        self._queue.append((request, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            if len(self._queue) < self.max_batch_size:
                await asyncio.sleep(self.window_s)  # let concurrent requests join
            taken, self._queue = self._queue[: self.max_batch_size], self._queue[self.max_batch_size :]
            batch = [(req, fut) for req, fut in taken if not fut.done()]  # done: its caller was cancelled
            if not batch:
                continue
            self.batch_sizes.append(len(batch))
            try:
                results = await loop.run_in_executor(self.executor, self.run_batch, [req for req, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"run_batch returned {len(results)} results for {len(batch)} requests")
            except Exception as error:  # the whole batch failed: every waiting request sees why
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(error)
                continue
            for (_, fut), result in zip(batch, results):
                if not fut.done():
                    fut.set_result(result)
