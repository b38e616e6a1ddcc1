"""``trainer.backend=ray``: the role workers as Ray actor groups on resource pools (the controller is unchanged).

Pools: the global pool has ``trainer.n_gpus_per_node`` processes on each of ``trainer.nnodes`` nodes and holds the
actor + rollout + reference (one hybrid-engine worker per process), plus the critic and the reward model unless
they ask for their own pool (``critic.enable_resource_pool`` / ``reward_model.enable_resource_pool`` with their own
``nnodes`` and ``n_gpus_per_node``). On ``trainer.device=cpu`` a "GPU" is a worker process with a share of the
CPU cores.
"""

from __future__ import annotations

import atexit
import json
import os
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from verl.single_controller.ray.cluster import RaySession, init_ray, shutdown_ray


@dataclass
class RayBackend:
    """What the controller needs of the backend beyond the role groups: overhead accounting and shutdown."""

    groups: list = field(default_factory=list)
    pools: list = field(default_factory=list)
    session: RaySession | None = None

    def pop_overhead_s(self) -> float:
        return sum(g.pop_overhead_s() for g in self.groups)

    def shutdown(self) -> None:
        for g in self.groups:
            g.shutdown()
        for p in self.pools:
            p.remove()
        self.groups, self.pools = [], []
        shutdown_ray(self.session)
        self.session = None


def _pool_shape(cfg: DictConfig) -> list[int]:
    return [int(cfg.n_gpus_per_node)] * int(cfg.nnodes)


def build_ray_workers(config: DictConfig, total_steps: int, policy_tokenizer) -> tuple[dict[str, Any], RayBackend]:
    """Start (or join) Ray, place the pools, start the worker groups and ``init_model`` every role."""
    import verl
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.trainer.ppo.ray_trainer import uses_critic, uses_reference_policy
    from verl.workers.fsdp_workers import ActorRolloutRefWorker, CriticWorker, RewardModelWorker

    t = config.trainer
    device = t.device
    use_gpu = device == "cuda"
    seed = t.seed
    role = "actor_rollout_ref" if uses_reference_policy(config) else "actor_rollout"
    specs = {
        "actor_rollout": RayClassWithInitArgs(
            ActorRolloutRefWorker, (config.actor_rollout_ref, role, total_steps, seed)
        )
    }
    separate: dict[str, tuple[list[int], dict[str, RayClassWithInitArgs]]] = {}
    if uses_critic(config):
        spec = RayClassWithInitArgs(CriticWorker, (config.critic, total_steps, seed))
        if config.critic.enable_resource_pool:
            separate["critic"] = (_pool_shape(config.critic), {"critic": spec})
        else:
            specs["critic"] = spec
    if config.reward_model.enable:
        spec = RayClassWithInitArgs(RewardModelWorker, (config.reward_model, policy_tokenizer))
        if config.reward_model.enable_resource_pool:
            separate["rm"] = (_pool_shape(config.reward_model), {"rm": spec})
        else:
            specs["rm"] = spec

    shapes = [_pool_shape(t)] + [shape for shape, _ in separate.values()]
    procs = sum(sum(s) for s in shapes)
    per_node = max(sum(s[0] for s in shapes), 1)  # processes sharing the first node's cores
    cores = os.cpu_count() or 1
    run_dir = os.path.abspath(os.path.expanduser(t.default_local_dir))
    backend = RayBackend()
    atexit.register(backend.shutdown)  # a script that never calls shutdown still leaves no Ray processes behind
    backend.session = init_ray(
        run_dir,
        num_cpus=config.ray_init.num_cpus or max(cores, procs),
        num_gpus=procs if use_gpu and config.ray_init.num_cpus is None else None,
        address=config.ray_init.address,
    )
    threads = config.ray_init.num_threads_per_worker or max(1, cores // per_node)
    verl_root = os.path.dirname(os.path.dirname(os.path.abspath(verl.__file__)))
    env = {
        "OMP_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "TQDM_DISABLE": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (verl_root, os.environ.get("PYTHONPATH")) if p),
    }
    if not use_gpu and t.get("cpu_retain_freed_memory", True):
        env["VERL_RETAIN_FREED_MEMORY"] = "1"  # applied by each worker process (verl.single_controller.ray.base)
    try:
        groups: dict[str, Any] = {}
        pools = [("global_pool", _pool_shape(t), specs)] + [(f"{n}_pool", s, sp) for n, (s, sp) in separate.items()]
        for name, shape, roles in pools:
            pool = RayResourcePool(shape, use_gpu=use_gpu, name=name)
            backend.pools.append(pool)
            group = RayWorkerGroup(pool, roles, device, env, threads, config.ray_init.dist_timeout_s)
            backend.groups.append(group)
            for r in roles:
                groups[r] = group.role(r)
        for r in ("actor_rollout", "critic", "rm"):
            if r in groups:
                groups[r].init_model()
        _write_worker_table(run_dir, backend)
    except BaseException:
        backend.shutdown()
        raise
    return groups, backend


def _write_worker_table(run_dir: str, backend: RayBackend) -> None:
    """``<run_dir>/workers.json``: role, rank, pid, node and parameter/optimizer bytes of every worker process (for
    operators and tests)."""
    rows = []
    for g in backend.groups:
        memory = {r: g.execute(r, "memory_stats") for r in g.roles if r in ("actor_rollout", "critic")}
        for info in g.info:
            mem = {r: per_rank[info["rank"]] for r, per_rank in memory.items()}
            rows.append({"roles": sorted(g.roles), "pool": g.resource_pool.name, **info, "memory": mem})
    with open(os.path.join(run_dir, "workers.json"), "w") as f:
        json.dump(rows, f, indent=1)
    summary = ", ".join(f"{'+'.join(r['roles'])} rank {r['rank']} pid {r['pid']}" for r in rows)
    print(f"ray backend: {len(rows)} worker processes ({summary})", flush=True)
