"""Where turns go: verl's server manager (least in flight, sticky trajectories), each turn's seed, and lockstep
rounds releasing every live trajectory's request together in row order."""

from __future__ import annotations

import asyncio

import pytest

from verl.experimental.agent_loop.server_manager import (
    AsyncLLMServerManager,
    LockstepRounds,
    TrajectoryServer,
    request_seed,
)
from verl.workers.rollout import TokenOutput


class Recorder:
    """A server handle that answers after ``delay`` seconds and records the requests in arrival order."""

    def __init__(self, name: str, delay: float = 0.0):
        self.name, self.delay, self.requests = name, delay, []

    async def generate(self, prompt_ids, sampling_params, request_id, image_data=None, video_data=None):
        self.requests.append((request_id, list(prompt_ids), dict(sampling_params)))
        await asyncio.sleep(self.delay)
        return TokenOutput(token_ids=[7], log_probs=[-0.5], finish_reason="stop")


def test_seeds_depend_on_call_row_and_turn_only():
    assert request_seed(1, 2, 3) == request_seed(1, 2, 3)
    seeds = {request_seed(c, r, t) for c in (1, 2) for r in (0, 1) for t in (0, 1)}
    assert len(seeds) == 8 and all(0 <= s < 2**63 for s in seeds)


def test_a_trajectory_stays_on_its_server_and_new_ones_go_to_the_least_busy():
    servers = [Recorder("a", 0.01), Recorder("b", 0.01)]
    manager = AsyncLLMServerManager(None, servers)

    async def main():
        await asyncio.gather(
            *(manager.generate(f"t{i}", prompt_ids=[1], sampling_params={}) for i in range(4)),
        )
        await manager.generate("t0", prompt_ids=[1, 7], sampling_params={})

    asyncio.run(main())
    assert [len(s.requests) for s in servers] == [3, 2]  # t0, t2 (+ t0's second turn) on a; t1, t3 on b
    assert servers[0].requests[-1][1] == [1, 7]


def test_an_empty_server_list_is_an_error():
    with pytest.raises(ValueError, match="at least one server handle"):
        AsyncLLMServerManager(None, [])


def test_lockstep_releases_a_round_when_every_live_trajectory_waits_in_row_order():
    server = Recorder("a")
    manager = AsyncLLMServerManager(None, [server])
    rounds = LockstepRounds(range(3))

    async def trajectory(row: int, turns: int, think: float):
        view = TrajectoryServer(manager, row, sample_index=10 + row, call_key=5, rounds=rounds)
        try:
            for _ in range(turns):
                await asyncio.sleep(think)  # a tool call of this row's own duration
                await view.generate(f"r{row}", prompt_ids=[row], sampling_params={"temperature": 1.0})
        finally:
            rounds.finish(row)

    async def main():  # rows start in reverse order and think for different times
        await asyncio.gather(trajectory(2, 1, 0.0), trajectory(1, 2, 0.03), trajectory(0, 3, 0.01))

    asyncio.run(main())
    assert rounds.round_sizes == [3, 2, 1]
    assert [prompt[0] for _, prompt, _ in server.requests] == [0, 1, 2, 0, 1, 0]  # every round in row order
    seeds = [params["seed"] for _, _, params in server.requests]
    assert seeds[0] == request_seed(5, 10, 0) and seeds[3] == request_seed(5, 10, 1)


def test_a_seed_the_loop_set_is_kept():
    server = Recorder("a")
    view = TrajectoryServer(AsyncLLMServerManager(None, [server]), 0, 0, call_key=1, rounds=None)
    asyncio.run(view.generate("x", prompt_ids=[1], sampling_params={"seed": 42}))
    assert server.requests[0][2]["seed"] == 42 and view.turns == 1 and view.generate_s > 0
