"""The replay buffer of wall-clock asynchronous training: prompt groups, their states and ages, and what the trainer may
take (verl's ``ReplayBufferAsync`` semantics, ``trainer.v1.sampler.*``; docs/async.md).

A *prompt group* is the unit: one prompt and its ``rollout.n`` responses. It is ``pending`` (its prompt taken from the
dataloader), ``running`` (being generated, started by policy version ``first_version``), ``finished`` or ``failed``.
Its *age* at policy version ``V`` is ``V - first_version``: how many updates separate its first token from the
update that would train on it. ``max_off_policy_threshold`` bounds the age of what is trained:

- ``drop``: a finished group older than the threshold is evicted, and exactly one new prompt is taken from the
  dataloader in its place (the refill);
- ``wait``: nothing is evicted for its age; groups that reach the threshold are trained first, and while one of them
  is still being generated the trainer waits for it rather than moving the policy on without it.

Failed groups are evicted and refilled under both. The trainer takes the oldest trainable groups by dataloader order,
so no group waits behind younger ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from verl.protocol import DataProto

__all__ = ["PromptGroup", "ReplayBuffer"]


@dataclass
class PromptGroup:
    index: int  # its place in the order prompts left the dataloader (refills continue it)
    prompt: DataProto  # one row: the prompt's columns, with its uid
    state: str = "pending"  # pending | running | finished | failed
    first_version: int | None = None  # the policy version that started generating it
    output: DataProto | None = None  # its responses (rollout.n rows), once finished
    last_version: np.ndarray | None = field(default=None, repr=False)  # per response: the newest version that sampled


class ReplayBuffer:
    """Prompt groups by ``index``; ``refill(k)`` must add ``k`` new pending groups (see the module docstring)."""

    def __init__(self, threshold: int, strategy: str, refill: Callable[[int], None]):
        if strategy not in ("drop", "wait"):
            raise ValueError(f"max_off_policy_strategy={strategy!r}: use drop or wait")
        self.threshold, self.strategy, self.refill = int(threshold), strategy, refill
        self.groups: dict[int, PromptGroup] = {}
        self.evicted = {"stale": 0, "failed": 0}  # since the last metrics

    # ------------------------------------------------------------------------------------------------ states
    def add(self, groups: list[PromptGroup]) -> None:
        for g in groups:
            if g.index in self.groups:
                raise ValueError(f"replay buffer: prompt group {g.index} is already in the buffer")
            self.groups[g.index] = g

    def pending(self, limit: int) -> list[PromptGroup]:
        """The oldest ``limit`` pending groups (those to generate next)."""
        return sorted((g for g in self.groups.values() if g.state == "pending"), key=lambda g: g.index)[:limit]

    def start(self, groups: list[PromptGroup], version: int) -> None:
        for g in groups:
            g.state, g.first_version = "running", version

    def finish(self, group: PromptGroup, output: DataProto, last_version: np.ndarray | int) -> None:
        rows = len(output)
        group.state, group.output = "finished", output
        group.last_version = np.broadcast_to(np.asarray(last_version, dtype=np.int64), (rows,)).copy()

    def fail(self, group: PromptGroup) -> None:
        group.state = "failed"

    def count(self, state: str) -> int:
        return sum(1 for g in self.groups.values() if g.state == state)

    def age(self, group: PromptGroup, version: int) -> int | None:
        return None if group.first_version is None else version - group.first_version

    # ------------------------------------------------------------------------------------------------ sampling
    def evict(self, version: int) -> int:
        """Evict the failed groups and, under ``drop``, the finished ones older than the threshold; refill as many
        prompts. Returns how many were evicted."""
        doomed = [g for g in self.groups.values() if g.state == "failed"]
        self.evicted["failed"] += len(doomed)
        if self.strategy == "drop":
            stale = [g for g in self.groups.values() if g.state == "finished" and self.age(g, version) > self.threshold]
            self.evicted["stale"] += len(stale)
            doomed += stale
        for g in doomed:
            del self.groups[g.index]
        if doomed:
            self.refill(len(doomed))
        return len(doomed)

    def take(self, count: int, version: int) -> list[PromptGroup] | None:
        """``count`` groups to train at ``version``, removed from the buffer, or None when the trainer must wait for
        generation first (too few finished, or under ``wait`` a group at the threshold still running). Evicts first."""
        self.evict(version)
        due = [g for g in self.groups.values() if g.state != "pending" and self.age(g, version) >= self.threshold]
        if self.strategy == "wait" and any(g.state == "running" for g in due):
            return None
        ready = [g for g in self.groups.values() if g.state == "finished"]
        if len(ready) < count:
            return None
        # the groups at the threshold first (under wait they cannot be trained later), then dataloader order
        ready.sort(key=lambda g: (self.age(g, version) < self.threshold, g.index))
        taken = sorted(ready[:count], key=lambda g: g.index)
        for g in taken:
            del self.groups[g.index]
        return taken

    def pop_metrics(self) -> dict[str, float]:
        out = {
            "async/queue_depth": float(self.count("finished")),
            "async/groups_running": float(self.count("running")),
            "async/groups_pending": float(self.count("pending")),
            "async/groups_dropped_stale": float(self.evicted["stale"]),
            "async/groups_dropped_failed": float(self.evicted["failed"]),
        }
        self.evicted = {"stale": 0, "failed": 0}
        return out
