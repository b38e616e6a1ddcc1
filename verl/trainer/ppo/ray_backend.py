"""``trainer.backend=ray``: the role workers as Ray actor groups on resource pools (the controller is unchanged).

Pools (``verl.trainer.ppo.roles.build_resource_pool_manager``): the global pool has ``trainer.n_gpus_per_node``
processes on each of ``trainer.nnodes`` nodes and holds the actor + rollout + reference (one hybrid-engine worker per
process), plus the critic and the reward model unless they ask for their own pool (``critic.enable_resource_pool`` /
``reward_model.enable_resource_pool`` with their own ``nnodes`` and ``n_gpus_per_node``). On ``trainer.device=cpu`` a
"GPU" is a worker process with a share of the CPU cores.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

from verl.sandbox.local import ISOLATION_ENV
from verl.single_controller.base import ClassWithInitArgs, RoleWorkerGroup
from verl.single_controller.ray.cluster import init_ray
from verl.trainer.ppo.utils import Role, WorkerBackend
from verl.utils.cpu_threads import thread_env, usable_cores


def start_ray_worker_groups(
    config: Any, specs: dict[str, tuple[ClassWithInitArgs, str]], pool_spec: dict[str, list[int]]
) -> tuple[dict[str, RoleWorkerGroup], WorkerBackend]:
    """Start (or join) Ray, place the pools (``pool_spec``: processes per node of each), start one worker group per
    pool holding the roles of ``specs`` mapped to it (colocated in its processes) and ``init_model`` every role."""
    from verl.single_controller.ray import RayResourcePool, RayWorkerGroup

    t = config.trainer
    use_gpu = t.device == "cuda"
    used = {pool for _, pool in specs.values()}
    shapes = [shape for name, shape in pool_spec.items() if name in used]
    procs = sum(sum(s) for s in shapes)
    per_node = max(sum(s[0] for s in shapes), 1)  # processes sharing the first node's cores
    cores = os.cpu_count() or 1
    run_dir = os.path.abspath(os.path.expanduser(t.default_local_dir))
    backend = WorkerBackend()
    atexit.register(backend.shutdown)  # a script that never calls shutdown still leaves no Ray processes behind
    backend.session = init_ray(
        run_dir,
        num_cpus=config.ray_init.num_cpus or max(cores, procs),
        num_gpus=procs if use_gpu and config.ray_init.num_cpus is None else None,
        address=config.ray_init.address,
    )
    threads = config.ray_init.num_threads_per_worker or max(1, usable_cores() // per_node)
    verl_root = str(Path(__file__).resolve().parents[3])  # the directory holding the verl package
    env = {
        # the count and this process's OpenMP wait policy, in the environment each worker starts with: its OpenMP
        # runtime reads them when torch loads (a cluster started elsewhere never saw this process's variables)
        **thread_env(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "TQDM_DISABLE": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (verl_root, os.environ.get("PYTHONPATH")) if p),
    }
    if os.environ.get(ISOLATION_ENV):  # sandbox.isolation (set at start): a worker that runs code follows it
        env[ISOLATION_ENV] = os.environ[ISOLATION_ENV]
    if t.deterministic:
        env["VERL_DETERMINISTIC"] = "1"  # applied by each worker process (verl.single_controller.ray.base)
    if not use_gpu and t.cpu_retain_freed_memory:
        env["VERL_RETAIN_FREED_MEMORY"] = "1"  # applied by each worker process (verl.single_controller.ray.base)
    try:
        handles: dict[str, RoleWorkerGroup] = {}
        for name, shape in pool_spec.items():
            members = {handle: spec for handle, (spec, pool) in specs.items() if pool == name}
            if not members:
                continue
            pool = RayResourcePool(shape, use_gpu=use_gpu, name=name)
            backend.pools.append(pool)
            group = RayWorkerGroup(pool, members, t.device, env, threads, config.ray_init.dist_timeout_s)
            backend.groups.append(group)
            handles.update({handle: group.role(handle) for handle in members})
        for handle in specs:  # build order: the policy, the critic, the reward model
            handles[handle].init_model()
        _write_worker_table(run_dir, backend)
    except BaseException:
        backend.shutdown()
        raise
    return handles, backend


def _write_worker_table(run_dir: str, backend: WorkerBackend) -> None:
    """``<run_dir>/workers.json``: role, rank, pid, node and parameter/optimizer bytes of every worker process (for
    operators and tests)."""
    rows = []
    for g in backend.groups:
        memory = {r: g.execute(r, "memory_stats") for r in g.roles if r != Role.RewardModel.handle}
        for info in g.info:
            mem = {r: per_rank[info["rank"]] for r, per_rank in memory.items()}
            rows.append({"roles": sorted(g.roles), "pool": g.resource_pool.name, **info, "memory": mem})
    with open(os.path.join(run_dir, "workers.json"), "w") as f:
        json.dump(rows, f, indent=1)
    summary = ", ".join(f"{'+'.join(r['roles'])} rank {r['rank']} pid {r['pid']}" for r in rows)
    print(f"ray backend: {len(rows)} worker processes ({summary})", flush=True)
