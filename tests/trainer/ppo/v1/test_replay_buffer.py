"""The replay buffer's staleness rules, driven by hand: ``drop`` evicts a stale group and refills exactly one prompt,
``wait`` trains a group at the threshold before it gets older and waits while one is still running; failed groups
are evicted and refilled under both; the oldest trainable groups go first."""

from __future__ import annotations

import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.v1.replay_buffer import PromptGroup, ReplayBuffer


class Prompts:
    """A dataloader of numbered prompts for the buffer's refills."""

    def __init__(self):
        self.next = 0
        self.refills: list[int] = []

    def groups(self, k: int) -> list[PromptGroup]:
        out = [PromptGroup(i, DataProto.from_dict({"p": torch.tensor([[i]])})) for i in range(self.next, self.next + k)]
        self.next += k
        return out


def make_buffer(threshold: int, strategy: str, groups: int) -> tuple[ReplayBuffer, Prompts]:
    prompts = Prompts()
    buffer = ReplayBuffer(
        threshold, strategy, refill=lambda k: (prompts.refills.append(k), buffer.add(prompts.groups(k)))
    )
    buffer.add(prompts.groups(groups))
    return buffer, prompts


def generate(buffer: ReplayBuffer, groups: list[PromptGroup], version: int) -> None:
    buffer.start(groups, version)
    for g in groups:
        buffer.finish(g, DataProto.from_dict({"r": torch.zeros(2, 1)}), version)


def test_drop_evicts_the_stale_group_and_refills_exactly_one_prompt():
    buffer, prompts = make_buffer(threshold=1, strategy="drop", groups=4)
    generate(buffer, buffer.pending(1), version=0)  # group 0 sampled by v0
    generate(buffer, buffer.pending(3), version=2)  # groups 1-3 by v2
    taken = buffer.take(2, version=2)  # group 0 is 2 versions old at v2: evicted
    assert [g.index for g in taken] == [1, 2]
    assert prompts.refills == [1] and 0 not in buffer.groups and buffer.groups[4].state == "pending"
    assert buffer.pop_metrics()["async/groups_dropped_stale"] == 1
    assert buffer.take(2, version=2) is None  # one finished (3), one pending (4): wait for generation


def test_wait_keeps_the_old_group_and_trains_it_first():
    buffer, prompts = make_buffer(threshold=1, strategy="wait", groups=4)
    generate(buffer, buffer.pending(1), version=0)
    generate(buffer, buffer.pending(3), version=1)
    taken = buffer.take(1, version=1)  # group 0 is at the threshold (age 1): first, whatever the others
    assert [g.index for g in taken] == [0] and prompts.refills == []


def test_wait_blocks_while_a_group_at_the_threshold_is_still_running():
    buffer, _ = make_buffer(threshold=1, strategy="wait", groups=3)
    buffer.start(buffer.pending(1), version=0)  # group 0 running since v0
    generate(buffer, buffer.pending(2), version=1)  # groups 1 and 2 finished by v1
    assert buffer.take(2, version=1) is None  # moving to v2 without group 0 would leave it past the threshold
    buffer.finish(buffer.groups[0], DataProto.from_dict({"r": torch.zeros(2, 1)}), 1)
    assert [g.index for g in buffer.take(2, version=1)] == [0, 1]
    drop, _ = make_buffer(threshold=1, strategy="drop", groups=3)
    drop.start(drop.pending(1), version=0)
    generate(drop, drop.pending(2), version=1)
    assert [g.index for g in drop.take(2, version=1)] == [1, 2]  # drop does not wait for it


@pytest.mark.parametrize("strategy", ["drop", "wait"])
def test_failed_groups_are_evicted_and_refilled_under_both(strategy):
    buffer, prompts = make_buffer(threshold=4, strategy=strategy, groups=3)
    generate(buffer, buffer.pending(3), version=0)
    buffer.fail(buffer.groups[1])
    assert [g.index for g in buffer.take(2, version=0)] == [0, 2]
    assert prompts.refills == [1] and buffer.groups[3].state == "pending"
    assert buffer.pop_metrics()["async/groups_dropped_failed"] == 1


def test_oldest_groups_first_and_no_duplicates():
    buffer, _ = make_buffer(threshold=8, strategy="drop", groups=6)
    for g in reversed(buffer.pending(6)):  # finished in reverse order
        generate(buffer, [g], version=0)
    assert [g.index for g in buffer.take(3, version=0)] == [0, 1, 2]
    with pytest.raises(ValueError, match="already in the buffer"):
        buffer.add([PromptGroup(3, DataProto.from_dict({"p": torch.tensor([[3]])}))])
