"""Many trajectories at once over the HF sampler's per-request generate, and the same seed giving the same
trajectories bit for bit, whatever the tools' timing and with 1 or 2 torch threads."""

from __future__ import annotations

import asyncio
import random

import pytest
import torch
from agent_loop_helpers import ECHO, actor_group, job_config, prompt_batch

from verl.experimental.agent_loop import AgentLoopManager
from verl.tools import ToolResponse

OVERRIDES = (
    "actor_rollout_ref.rollout.agent.default_agent_loop=test_echo_agent",
    "actor_rollout_ref.rollout.multi_turn.format=test_every_turn_calls_echo",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
    "actor_rollout_ref.rollout.response_length=128",
    "data.max_response_length=128",
)
ROWS = 8


@pytest.fixture(scope="module")
def group():
    return actor_group(job_config(*OVERRIDES))


def manager_for(group, *overrides):
    config = job_config(*OVERRIDES, *overrides)
    return AgentLoopManager(config, group, server_handles=[group], tokenizer=group.tokenizer)


def test_all_trajectories_run_concurrently_and_their_turns_are_batched(group):
    manager = manager_for(group)
    random.seed(0)
    out = manager.generate_sequences(prompt_batch(group.tokenizer, ROWS))
    sizes = group.rollout._batcher.batch_sizes  # the batcher of this call's event loop
    rounds = manager.worker.last_rounds.round_sizes
    assert sizes == rounds  # one sampler batch per round: every unfinished trajectory's turn together
    assert sizes[0] == ROWS and len(sizes) <= 3
    assert sum(sizes) == sum(m["assistant_turns"] for m in out.non_tensor_batch["agent_loop_metrics"])


def test_without_lockstep_turns_are_still_batched_as_they_arrive(group):
    manager = manager_for(group, "actor_rollout_ref.rollout.agent.lockstep=false")
    random.seed(0)
    manager.generate_sequences(prompt_batch(group.tokenizer, ROWS))
    sizes = group.rollout._batcher.batch_sizes
    assert manager.worker.last_rounds is None and sizes[0] == ROWS


class JitteryEcho:
    """Makes the echo tool answer after a random delay: trajectories reach their next turn in a random order."""

    def __enter__(self):
        rng = random.Random()  # unseeded: another order every run

        async def slow(parameters):
            await asyncio.sleep(rng.uniform(0, 0.02))
            return ToolResponse(text=f"echo {parameters}"), 0.0, {}

        ECHO.answer = slow
        return self

    def __exit__(self, *exc):
        del ECHO.answer  # the class's own again


def trajectories(group, threads: int):
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with JitteryEcho():
            random.seed(1234)
            out = manager_for(group).generate_sequences(prompt_batch(group.tokenizer, ROWS))
    finally:
        torch.set_num_threads(previous)
    return out


def assert_same(a, b):
    assert a.batch.keys() == b.batch.keys()
    for key in a.batch.keys():
        assert torch.equal(a.batch[key], b.batch[key]), key
    for key in ("__num_turns__", "finish_reason"):
        assert a.non_tensor_batch[key].tolist() == b.non_tensor_batch[key].tolist(), key


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_same_seed_same_trajectories_bit_for_bit(group, threads):
    first, second = trajectories(group, threads), trajectories(group, threads)
    assert_same(first, second)
    assert (first.batch["response_mask"] == 0).logical_and(first.batch["attention_mask"][:, -128:] == 1).any()


def test_one_and_two_threads_give_the_same_trajectories(group):
    assert_same(trajectories(group, 1), trajectories(group, 2))
