"""The roles of a PPO-family run and the worker groups that play them, built once from the config for either backend.

    roles = build_role_worker_mapping(config, total_steps, tokenizer)   # Role -> worker class + its arguments
    pools = build_resource_pool_manager(config, roles)                   # which processes each role runs on
    handles, backend = init_workers(config, roles, pools)                # {"actor_rollout": group, "critic": ...}

``trainer.backend=local`` builds every role in one `LocalWorkerGroup` (a group of size one in this process);
``trainer.backend=ray`` builds one Ray worker group per resource pool (``verl.trainer.ppo.ray_backend``). Both get the
same role list and the device (``trainer.device``) explicitly; the controller sees the same handles either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from verl.single_controller.base import ClassWithInitArgs, LocalWorkerGroup, RoleWorkerGroup
from verl.workers.fsdp_workers import ActorRolloutRefWorker, CriticWorker, RewardModelWorker

CRITIC_ESTIMATORS = ("gae",)
GLOBAL_POOL = "global_pool"


class Role(str, Enum):
    """A role of the dataflow (verl's names); the value is the controller's handle for its worker group."""

    ActorRollout = "actor_rollout"  # the policy: actor and rollout in one worker (hybrid engine)
    ActorRolloutRef = "actor_rollout_ref"  # the same, holding the frozen reference policy too
    Critic = "critic"
    RewardModel = "rm"

    @property
    def handle(self) -> str:
        return "actor_rollout" if self in (Role.ActorRollout, Role.ActorRolloutRef) else self.value


@dataclass
class ResourcePoolManager:
    """verl's name: the processes of each resource pool (per node) and the pool each role runs on. Roles that share
    a pool share its processes (colocated)."""

    resource_pool_spec: dict[str, list[int]]
    mapping: dict[Role, str] = field(default_factory=dict)


def uses_reference_policy(config: Any) -> bool:
    enable = config.actor_rollout_ref.ref.enable
    if enable is not None:
        return bool(enable)
    return bool(config.actor_rollout_ref.actor.use_kl_loss or config.algorithm.use_kl_in_reward)


def uses_critic(config: Any) -> bool:
    enable = config.critic.enable
    return bool(enable) if enable is not None else config.algorithm.adv_estimator in CRITIC_ESTIMATORS


def build_role_worker_mapping(config: Any, total_steps: int, policy_tokenizer: Any) -> dict[Role, ClassWithInitArgs]:
    """The run's roles, in the order their models are built: the policy, the critic (estimators that need values),
    the reward model (``reward_model.enable``)."""
    seed = config.trainer.seed
    policy = Role.ActorRolloutRef if uses_reference_policy(config) else Role.ActorRollout
    roles = {
        policy: ClassWithInitArgs(ActorRolloutRefWorker, (config.actor_rollout_ref, policy.value, total_steps, seed))
    }
    if uses_critic(config):
        roles[Role.Critic] = ClassWithInitArgs(CriticWorker, (config.critic, total_steps, seed))
    if config.reward_model.enable:
        roles[Role.RewardModel] = ClassWithInitArgs(RewardModelWorker, (config.reward_model, policy_tokenizer))
    return roles


def build_resource_pool_manager(config: Any, roles: dict[Role, ClassWithInitArgs]) -> ResourcePoolManager:
    """The global pool (``trainer.nnodes`` x ``trainer.n_gpus_per_node`` processes) holds every role, except the
    critic and the reward model when they ask for their own pool (``<role>.enable_resource_pool``)."""
    t = config.trainer
    pools = ResourcePoolManager({GLOBAL_POOL: [t.n_gpus_per_node] * t.nnodes})
    for role in roles:
        section = {Role.Critic: config.critic, Role.RewardModel: config.reward_model}.get(role)
        if section is not None and section.enable_resource_pool:
            name = f"{role.handle}_pool"
            pools.resource_pool_spec[name] = [section.n_gpus_per_node] * section.nnodes
            pools.mapping[role] = name
        else:
            pools.mapping[role] = GLOBAL_POOL
    return pools


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


def init_workers(
    config: Any, roles: dict[Role, ClassWithInitArgs], pools: ResourcePoolManager
) -> tuple[dict[str, RoleWorkerGroup], WorkerBackend]:
    """Start the workers of ``roles`` on ``trainer.backend`` and build every role's model (``init_model``, in role
    order); returns the controller's handles by name and the backend."""
    if config.trainer.backend == "ray":
        from verl.trainer.ppo.ray_backend import start_ray_worker_groups

        return start_ray_worker_groups(config, roles, pools)
    if config.trainer.device == "cpu" and config.trainer.cpu_retain_freed_memory:
        from verl.utils.cpu_malloc import retain_freed_memory

        retain_freed_memory()
    group = LocalWorkerGroup({role.handle: spec for role, spec in roles.items()}, device=config.trainer.device)
    handles = {role.handle: group.role(role.handle) for role in roles}
    for handle in handles.values():
        handle.init_model()
    return handles, WorkerBackend(groups=[group])
