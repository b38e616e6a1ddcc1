"""Where an agent loop's model turns go: verl's ``AsyncLLMServerManager`` over the rollout's server handles, and the
per-trajectory view each loop instance gets (`TrajectoryServer`).

``AsyncLLMServerManager.generate(request_id, prompt_ids=..., sampling_params=...)`` sends one turn to a server
handle (``await handle.generate(prompt_ids, sampling_params, request_id)`` -> ``TokenOutput``): the handle with the
fewest requests in flight, and the same one for every turn of a trajectory (``request_id`` is sticky), as verl's.

`TrajectoryServer` is what a loop sees as ``self.server_manager``. It adds what makes trajectories reproducible:

- each turn's ``sampling_params["seed"]`` (unless the loop set one): a hash of the batch call's key, the row's
  ``sample_index`` and the turn's number, so a token's draw depends on neither the batch it is decoded in nor the
  order requests arrive;
- with ``lockstep`` (`LockstepRounds`), requests wait until every unfinished trajectory of the batch has one
  waiting, then go to the server together in row order: the HF sampler's batches, hence its float results, are the
  same in every run, whatever the tools' timing.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["AsyncLLMServerManager", "LockstepRounds", "TrajectoryServer", "request_seed"]


def request_seed(call_key: int, sample_index: int, turn: int) -> int:
    """A request's sampling seed in [0, 2**63): a hash of (batch call key, row's sample index, turn number)."""
    digest = hashlib.blake2b(f"{call_key}/{sample_index}/{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class AsyncLLMServerManager:
    """verl's server manager: least-in-flight balancing over ``server_handles`` with sticky trajectories."""

    def __init__(self, config: Any, server_handles: list[Any], max_cache_size: int = 10000):
        if not server_handles:
            raise ValueError("AsyncLLMServerManager needs at least one server handle")
        self.config = config
        self.server_handles = list(server_handles)
        self._in_flight = [0] * len(self.server_handles)
        self._sticky: OrderedDict[str, int] = OrderedDict()  # request_id -> server index (LRU)
        self._max_cache_size = max_cache_size
        self._turns = 0

    def _choose(self, request_id: str) -> int:
        if request_id in self._sticky:
            self._sticky.move_to_end(request_id)
            return self._sticky[request_id]
        index = min(range(len(self.server_handles)), key=lambda i: (self._in_flight[i], i))
        self._sticky[request_id] = index
        if len(self._sticky) > self._max_cache_size:
            self._sticky.popitem(last=False)
        return index

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
    ) -> Any:
        """One model turn of trajectory ``request_id``: a ``TokenOutput``."""
        index = self._choose(request_id)
        self._turns += 1
        self._in_flight[index] += 1
        try:
            return await self.server_handles[index].generate(
                prompt_ids=prompt_ids,
                sampling_params=sampling_params,
                request_id=f"{request_id}-{self._turns}",
                image_data=image_data,
                video_data=video_data,
            )
        finally:
            self._in_flight[index] -= 1


class LockstepRounds:
    """Holds requests until every live trajectory has one waiting, then starts them all in trajectory order.

    A trajectory is live from the start until `finish` (the worker calls it when the trajectory's loop returns or
    raises). A trajectory running a tool is live and not waiting, so the round waits for it.
    """

    def __init__(self, trajectories: range | list[int]):
        self.live = set(trajectories)
        self.waiting: dict[int, list[tuple[Callable[[], Awaitable], asyncio.Future]]] = {}
        self.round_sizes: list[int] = []  # requests started per round (for tests and the benchmark)

    async def request(self, trajectory: int, call: Callable[[], Awaitable]) -> Any:
        future = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(trajectory, []).append((call, future))
        self._release_if_complete()
        return await future

    def finish(self, trajectory: int) -> None:
        self.live.discard(trajectory)
        self._release_if_complete()

    def _release_if_complete(self) -> None:
        if not self.waiting or any(t not in self.waiting for t in self.live):
            return
        ready, self.waiting = sorted(self.waiting.items()), {}
        self.round_sizes.append(sum(len(calls) for _, calls in ready))
        for _, calls in ready:
            for call, future in calls:
                task = asyncio.ensure_future(call())  # started in trajectory order: the server sees this order
                task.add_done_callback(lambda t, f=future: _settle(f, t))


def _settle(future: asyncio.Future, task: asyncio.Task) -> None:
    if future.done():  # the requester was cancelled
        return
    if task.cancelled():
        future.cancel()
    elif task.exception() is not None:
        future.set_exception(task.exception())
    else:
        future.set_result(task.result())


class TrajectoryServer:
    """One trajectory's view of the server manager (see the module docstring); also times its turns.

    Args:
        manager: the batch's `AsyncLLMServerManager`.
        trajectory: the row's position in the batch (its place in a lockstep round).
        sample_index: the row's ``sample_index`` (its seeds' key).
        call_key: the batch call's key (see `request_seed`).
        rounds: the batch's `LockstepRounds`, or None to send each request at once.
    """

    def __init__(self, manager: Any, trajectory: int, sample_index: int, call_key: int, rounds: LockstepRounds | None):
        self.manager = manager
        self.trajectory, self.sample_index, self.call_key = trajectory, int(sample_index), int(call_key)
        self.rounds = rounds
        self.turns = 0
        self.generate_s = 0.0
        self.num_preempted = 0

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
    ) -> Any:
        params = dict(sampling_params)
        params.setdefault("seed", request_seed(self.call_key, self.sample_index, self.turns))
        self.turns += 1

        def call() -> Awaitable:
            return self.manager.generate(
                request_id, prompt_ids=prompt_ids, sampling_params=params, image_data=image_data, video_data=video_data
            )

        start = time.perf_counter()
        try:
            out = await (self.rounds.request(self.trajectory, call) if self.rounds is not None else call())
        finally:
            self.generate_s += time.perf_counter() - start
        self.num_preempted += getattr(out, "num_preempted", None) or 0
        return out

    def __getattr__(self, name: str) -> Any:  # the manager's other attributes (server_handles, config, ...)
        return getattr(self.manager, name)
