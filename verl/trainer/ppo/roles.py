"""The roles of a PPO-family run and the worker groups that play them, built once for either backend.

    roles = build_role_worker_mapping(config)                  # Role -> worker class (verl's role_worker_mapping)
    pools = build_resource_pool_manager(config, roles)         # which processes each role runs on
    handles, backend = init_workers(config, roles, pools, total_steps, tokenizer)   # {"actor_rollout": group, ...}
                                                               # + "async_rollout_manager": the agent loop or None

``trainer.backend=local`` builds every role in one `LocalWorkerGroup` (a group of size one in this process);
``trainer.backend=ray`` builds one Ray worker group per resource pool (``verl.trainer.ppo.ray_backend``). Both get the
same role list, the same constructor arguments (`worker_init_args`) and the device explicitly; the controller sees
the same handles either way. ``RayPPOTrainer(config, tokenizer, role_worker_mapping, resource_pool_manager)`` then
``init_workers()`` is verl's recipe-style construction of the same thing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from verl.single_controller.base import ClassWithInitArgs, LocalWorkerGroup, RoleWorkerGroup
from verl.trainer.ppo.utils import Role, WorkerBackend, need_reward_model  # noqa: F401 (importable from here)
from verl.utils.ppo_config import (
    CRITIC_ESTIMATORS,  # noqa: F401 (importable from here, as before)
    uses_agent_loop,
    uses_critic,
    uses_reference_policy,
)
from verl.workers.fsdp_workers import ActorRolloutRefWorker, CriticWorker, RewardModelWorker

logger = logging.getLogger(__name__)

GLOBAL_POOL = "global_pool"


@dataclass
class ResourcePoolManager:
    """verl's name: the processes of each resource pool (per node) and the pool each role runs on. Roles that share
    a pool share its processes (colocated)."""

    resource_pool_spec: dict[str, list[int]]
    mapping: dict[Role, str] = field(default_factory=dict)

    def get_n_gpus(self) -> int:
        return sum(sum(shape) for shape in self.resource_pool_spec.values())


need_reference_policy, need_critic = uses_reference_policy, uses_critic  # verl's names


def build_role_worker_mapping(config: Any) -> dict[Role, type]:
    """The run's roles and their worker classes, in the order their models are built: the policy (with the
    reference when a KL term needs it), the critic (estimators that need values), the reward model."""
    policy = Role.ActorRolloutRef if uses_reference_policy(config) else Role.ActorRollout
    roles: dict[Role, type] = {policy: ActorRolloutRefWorker}
    if uses_critic(config):
        roles[Role.Critic] = CriticWorker
    if config.reward_model.enable:
        roles[Role.RewardModel] = RewardModelWorker
    return roles


def build_resource_pool_manager(config: Any, roles: dict[Role, Any]) -> ResourcePoolManager:
    """The global pool (``trainer.nnodes`` x ``trainer.n_gpus_per_node`` processes) holds every role, except the
    critic and the reward model when they ask for their own pool (``<role>.enable_resource_pool``)."""
    t = config.trainer
    pools = ResourcePoolManager({GLOBAL_POOL: [t.n_gpus_per_node] * t.nnodes})
    for role in roles:
        section = {Role.Critic: config.critic, Role.RewardModel: config.reward_model}.get(role)
        if section is not None and section.enable_resource_pool:
            pools.resource_pool_spec[f"{role.handle}_pool"] = [section.n_gpus_per_node] * section.nnodes
            pools.mapping[role] = f"{role.handle}_pool"
        else:
            pools.mapping[role] = GLOBAL_POOL
    return pools


def worker_init_args(role: Role, config: Any, total_steps: int, policy_tokenizer: Any) -> tuple:
    """The constructor arguments of ``role``'s worker (the same on every backend and rank)."""
    seed = config.trainer.seed
    if role in (Role.ActorRollout, Role.ActorRolloutRef):
        return (config.actor_rollout_ref, str(role), total_steps, seed)
    if role is Role.Critic:
        return (config.critic, total_steps, seed)
    if role is Role.RewardModel:
        return (config.reward_model, policy_tokenizer)
    raise ValueError(f"role {role} has no worker here: the policy runs as Role.ActorRollout (hybrid engine)")


def role_specs(
    config: Any, roles: dict[Role, Any], pools: ResourcePoolManager, total_steps: int, tokenizer: Any
) -> dict[str, tuple[ClassWithInitArgs, str]]:
    """``{handle: (worker class with its arguments, pool name)}`` in build order. A verl recipe's mapping may give
    Ray remote classes and a separate ``Role.RefPolicy``: the class is unwrapped, and the reference joins the
    policy's worker (``ActorRolloutRef``), since the hybrid engine holds both."""
    roles = dict(roles)
    wants_ref = roles.pop(Role.RefPolicy, None) is not None or uses_reference_policy(config)
    if wants_ref and Role.ActorRollout in roles:
        roles = {(Role.ActorRolloutRef if r is Role.ActorRollout else r): c for r, c in roles.items()}
        pools.mapping.setdefault(Role.ActorRolloutRef, pools.mapping.get(Role.ActorRollout, GLOBAL_POOL))
    specs = {}
    for role, cls in roles.items():
        if isinstance(cls, ClassWithInitArgs):
            spec = cls
        else:
            cls = getattr(cls, "__ray_actor_class__", cls)  # ray.remote(Worker) -> Worker
            spec = ClassWithInitArgs(cls, worker_init_args(role, config, total_steps, tokenizer))
        specs[role.handle] = (spec, pools.mapping.get(role, GLOBAL_POOL))
    return specs


def init_workers(
    config: Any, roles: dict[Role, Any], pools: ResourcePoolManager, total_steps: int, tokenizer: Any = None
) -> tuple[dict[str, RoleWorkerGroup], WorkerBackend]:
    """Start the workers of ``roles`` on ``trainer.backend`` and build every role's model (``init_model``, in role
    order); returns the controller's handles by name and the backend."""
    specs = role_specs(config, roles, pools, total_steps, tokenizer)
    if config.trainer.backend == "ray":
        from verl.trainer.ppo.ray_backend import start_ray_worker_groups

        pool_spec = dict(pools.resource_pool_spec)
        if config.trainer.v1.trainer_mode == "separate_async":  # standalone replicas in a pool of their own
            from verl.trainer.ppo.v1.separate_async import REPLICA_POOL, replica_agent_loop, replica_concurrency
            from verl.workers.rollout.replica_worker import RolloutReplicaWorker

            args = (config.actor_rollout_ref, config.trainer.seed, config, replica_agent_loop)
            replica = ClassWithInitArgs(RolloutReplicaWorker, args, max_concurrency=replica_concurrency(config))
            specs["rollout_replica"] = (replica, REPLICA_POOL)
            pool_spec[REPLICA_POOL] = [config.rollout.n_gpus_per_node] * config.rollout.nnodes
        handles, backend = start_ray_worker_groups(config, specs, pool_spec)
    else:
        if config.trainer.device == "cpu" and config.trainer.cpu_retain_freed_memory:
            from verl.utils.cpu_malloc import retain_freed_memory

            retain_freed_memory()
        group = LocalWorkerGroup({handle: spec for handle, (spec, _) in specs.items()}, device=config.trainer.device)
        handles = {handle: group.role(handle) for handle in specs}
        for handle in handles.values():
            handle.init_model()
        backend = WorkerBackend(groups=[group])
    handles["async_rollout_manager"] = build_async_rollout_manager(config, handles.get("actor_rollout"), tokenizer)
    return handles, backend


def build_async_rollout_manager(config: Any, actor_rollout_wg: Any, tokenizer: Any = None) -> Any:
    """verl's ``async_rollout_manager``: the agent loop (``AgentLoopManager``) over the actor's rollout servers when
    the run generates through it (``rollout.mode=async`` or ``multi_turn.enable`` on the local backend,
    `uses_agent_loop`) and the engine serves a per-request ``generate``; else None (the actor group's batch call
    generates). ``multi_turn.enable`` with an engine that has no per-request ``generate`` is an error naming it."""
    rollout = config.actor_rollout_ref.rollout
    if actor_rollout_wg is None or not uses_agent_loop(config):
        if rollout.mode == "async" and actor_rollout_wg is not None:
            logger.info("rollout.mode=async on trainer.backend=%s: the batch call generates", config.trainer.backend)
        return None
    from verl.experimental.agent_loop import AgentLoopManager
    from verl.trainer.ppo.rollout_servers import async_rollout_servers
    from verl.workers.rollout.base import BaseRollout

    engine = type(actor_rollout_wg.rollout)  # in process on the local backend
    if engine.generate is BaseRollout.generate:  # the engine serves batch calls only
        if rollout.multi_turn.enable:
            raise ValueError(
                f"actor_rollout_ref.rollout.multi_turn.enable=true runs the agent loop over the rollout's per-request "
                f"generate, which {engine.__name__} (rollout.name={rollout.name}) does not serve: use rollout.name=hf"
            )
        logger.info("rollout.mode=async: %s serves batch calls only, so the batch call generates", engine.__name__)
        return None
    servers = async_rollout_servers(actor_rollout_wg)
    return AgentLoopManager(config, actor_rollout_wg, server_handles=servers, tokenizer=tokenizer)
