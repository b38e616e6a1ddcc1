"""The vocabulary of a run's roles, shared by `verl.trainer.ppo.roles` (which builds them) and the backends that start
them (`verl.trainer.ppo.ray_backend`): `Role`, the `WorkerBackend` handle, and verl's other
``verl.trainer.ppo.utils`` names (``WorkerType``, ``need_critic``, ``need_reference_policy``,
``need_reward_model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from verl.single_controller.base import Worker
from verl.utils.ppo_config import uses_critic as need_critic
from verl.utils.ppo_config import uses_reference_policy as need_reference_policy

WorkerType = type[Worker]

__all__ = ["Role", "WorkerBackend", "WorkerType", "need_critic", "need_reference_policy", "need_reward_model"]


class Role(Enum):
    """A role of the dataflow (verl's names and values). Here the reference policy lives in the policy's worker
    (``ActorRolloutRef``); the separate ``Actor``/``Rollout``/``Env`` roles of other engines do not run."""

    Actor = 0
    Rollout = 1
    ActorRollout = 2
    Critic = 3
    RefPolicy = 4
    RewardModel = 5
    ActorRolloutRef = 6
    Env = 7

    def __str__(self) -> str:
        return _ROLE_NAMES.get(self, self.name.lower())

    @classmethod
    def from_string(cls, name: str) -> Role:
        for role, text in _ROLE_NAMES.items():
            if text == name.lower():
                return role
        raise ValueError(f"no Role named {name!r}: one of {sorted(_ROLE_NAMES.values())}")

    @property
    def handle(self) -> str:
        """The controller's name for the role's worker group."""
        return "actor_rollout" if self in (Role.ActorRollout, Role.ActorRolloutRef) else str(self)


_ROLE_NAMES = {
    Role.Actor: "actor",
    Role.Rollout: "rollout",
    Role.ActorRollout: "actor_rollout",
    Role.Critic: "critic",
    Role.RefPolicy: "ref",
    Role.RewardModel: "rm",
    Role.ActorRolloutRef: "actor_rollout_ref",
}


def need_reward_model(role_worker_mapping: dict[Role, Any]) -> bool:
    return Role.RewardModel in role_worker_mapping


@dataclass
class WorkerBackend:
    """What the controller needs of the backend beyond the role groups: overhead accounting and shutdown."""

    groups: list = field(default_factory=list)
    pools: list = field(default_factory=list)
    session: Any = None  # the Ray session this backend started or joined

    def pop_overhead_s(self) -> float | None:
        """Driver time in worker calls not spent computing (Ray, pickling, transfer) since the last call; None when
        the workers run in this process."""
        parts = [g.pop_overhead_s() for g in self.groups]
        return None if any(p is None for p in parts) else sum(parts)

    def shutdown(self) -> None:
        for g in self.groups:
            g.shutdown()
        for p in self.pools:
            p.remove()
        self.groups, self.pools = [], []
        if self.session is not None:
            from verl.single_controller.ray.cluster import shutdown_ray

            shutdown_ray(self.session)
            self.session = None
