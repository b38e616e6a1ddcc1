"""Worker groups as Ray actors: resource pools backed by placement groups, one process per rank, colocated roles.

A ``RayResourcePool`` reserves ``process_on_nodes[i]`` bundles on node i (one placement group per node, packed on
that node); each bundle holds one worker process (a CPU on CPU runs, a GPU on GPU runs). A ``RayWorkerGroup``
starts one ``WorkerProcess`` actor per bundle, joins them in a torch process group (gloo on CPU, NCCL on GPU) and
builds the role workers inside them: several roles in one group share the processes and devices (verl's
colocation: actor + rollout + reference, and the critic unless it has its own pool). ``group.role(name)`` is what
the controller calls: every ``@register``-ed method of the role's class, spread and gathered by its dispatch mode.

A failed call (a worker process died, or raised) kills the group and raises `WorkerGroupError` naming the role,
rank, pid and node, so a dead peer never leaves the others hanging in a collective.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from typing import Any

from verl.single_controller.base.decorator import collect_results, dispatch_args, registered_methods
from verl.single_controller.base.worker_group import ClassWithInitArgs, RoleWorkerGroup, WorkerGroupError
from verl.utils.import_utils import require

__all__ = ["RayClassWithInitArgs", "RayResourcePool", "RayWorkerGroup", "RoleWorkerGroup", "WorkerGroupError"]


class RayClassWithInitArgs(ClassWithInitArgs):
    """A role's worker class and its constructor arguments, built inside each Ray worker process (verl's name)."""


class RayResourcePool:
    """``process_on_nodes``: worker processes per node, e.g. ``[2, 2]`` for 2 nodes x 2. ``use_gpu``: one GPU per
    process; otherwise ``cpus_per_worker`` logical CPUs."""

    def __init__(
        self, process_on_nodes: list[int], use_gpu: bool = False, name: str = "global_pool", cpus_per_worker=1
    ):
        if not process_on_nodes or min(process_on_nodes) < 1:
            raise ValueError(f"resource pool {name!r}: processes per node must be >= 1, got {process_on_nodes}")
        self.process_on_nodes = list(process_on_nodes)
        self.use_gpu = use_gpu
        self.name = name
        self.cpus_per_worker = cpus_per_worker
        self._pgs: list | None = None

    @property
    def world_size(self) -> int:
        return sum(self.process_on_nodes)

    def placement_groups(self, timeout_s: float = 60.0) -> list:
        if self._pgs is None:
            ray = require("ray", "ray[default]", "the Ray backend (trainer.backend=ray)")
            from ray.util.placement_group import placement_group

            bundle = {"CPU": self.cpus_per_worker, **({"GPU": 1} if self.use_gpu else {})}
            self._pgs = [
                placement_group([dict(bundle) for _ in range(n)], strategy="STRICT_PACK", name=f"{self.name}_{i}")
                for i, n in enumerate(self.process_on_nodes)
            ]
            ready, _ = ray.wait([pg.ready() for pg in self._pgs], num_returns=len(self._pgs), timeout=timeout_s)
            if len(ready) < len(self._pgs):
                self.remove()
                raise RuntimeError(
                    f"resource pool {self.name!r} needs {self.process_on_nodes} bundles of {bundle} (nodes x "
                    f"processes) but the Ray cluster could not place them within {timeout_s:.0f} s; cluster "
                    f"resources: {ray.cluster_resources()}. Lower trainer.nnodes / trainer.n_gpus_per_node or add "
                    "nodes (ray start --address=<head>:6379)."
                )
        return self._pgs

    def bundles(self) -> list[tuple[Any, int]]:
        """``(placement group, bundle index)`` of every rank, in rank order."""
        pgs = self.placement_groups()
        return [(pg, j) for pg, n in zip(pgs, self.process_on_nodes) for j in range(n)]

    def remove(self) -> None:
        if self._pgs:
            from ray.util.placement_group import remove_placement_group

            for pg in self._pgs:
                try:
                    remove_placement_group(pg)
                except Exception:  # the cluster may already be gone at shutdown
                    pass
        self._pgs = None


class WorkerProcess:
    """One rank: a Ray actor holding the role workers of its group (the class Ray runs; see `RayWorkerGroup`)."""

    def __init__(self, rank: int, world_size: int, env: dict[str, str], num_threads: int):
        import torch

        os.environ.update(env)
        torch.set_num_threads(max(1, num_threads))
        if env.get("VERL_RETAIN_FREED_MEMORY") == "1":
            from verl.utils.cpu_malloc import retain_freed_memory

            retain_freed_memory()
        self.rank, self.world_size = rank, world_size
        self.workers: dict[str, Any] = {}

    def info(self) -> dict[str, Any]:
        import ray

        return {"rank": self.rank, "pid": os.getpid(), "node": ray.util.get_node_ip_address()}

    def master_address(self) -> tuple[str, int]:
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def init_process_group(self, addr: str, port: int, backend: str, timeout_s: float) -> None:
        import torch
        import torch.distributed as dist

        if backend == "nccl":
            if not torch.cuda.is_available():
                raise RuntimeError(
                    f"trainer.device=cuda but worker rank {self.rank} (pid {os.getpid()}) sees no CUDA device: "
                    "check the node's GPUs and its torch build, or use trainer.device=cpu"
                )
            torch.cuda.set_device(0)  # Ray exposes exactly this bundle's GPU as device 0
        dist.init_process_group(
            backend,
            init_method=f"tcp://{addr}:{port}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=timeout_s),
        )

    def add_role(self, name: str, spec: ClassWithInitArgs, device: str) -> None:
        self.workers[name] = spec.build(device)

    def execute(self, role: str, method: str, args: tuple, kwargs: dict) -> tuple[Any, float]:
        """Run ``role.method(*args, **kwargs)``; returns the result and its compute seconds on this rank."""
        t = time.perf_counter()
        out = getattr(self.workers[role], method)(*args, **kwargs)
        return out, time.perf_counter() - t


class RayWorkerGroup:
    """Worker processes on ``resource_pool``, each holding one worker per entry of ``roles``."""

    def __init__(
        self,
        resource_pool: RayResourcePool,
        roles: dict[str, ClassWithInitArgs],
        device: str = "cpu",
        env: dict[str, str] | None = None,
        num_threads: int = 1,
        dist_timeout_s: float = 600.0,
    ):
        ray = require("ray", "ray[default]", "the Ray backend (trainer.backend=ray)")
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.resource_pool = resource_pool
        self.roles = dict(roles)
        self.world_size = resource_pool.world_size
        self.overhead_s = 0.0  # driver wall time of calls minus the slowest rank's compute: Ray + transfer cost
        self.calls = 0
        self._alive = True
        env = dict(env or {})
        remote = ray.remote(WorkerProcess)
        self.workers = []
        for rank, (pg, index) in enumerate(resource_pool.bundles()):
            options = {
                "num_cpus": resource_pool.cpus_per_worker,
                "num_gpus": 1 if resource_pool.use_gpu else 0,
                "max_restarts": 0,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=index),
                "runtime_env": {"env_vars": env},
                "name": f"{resource_pool.name}_{'+'.join(roles)}_rank{rank}_{os.getpid()}_{id(self)}",
            }
            self.workers.append(remote.options(**options).remote(rank, self.world_size, env, num_threads))
        self.info = self._get([w.info.remote() for w in self.workers], "+".join(roles), "start")
        addr, port = self._get([self.workers[0].master_address.remote()], "+".join(roles), "start")[0]
        backend = "nccl" if device == "cuda" else "gloo"
        self._get(
            [w.init_process_group.remote(addr, port, backend, dist_timeout_s) for w in self.workers],
            "+".join(roles),
            "init_process_group",
        )
        for name, spec in roles.items():
            self._get([w.add_role.remote(name, spec, device) for w in self.workers], name, "__init__")

    def role(self, name: str) -> RoleWorkerGroup:
        if name not in self.roles:
            raise KeyError(f"worker group has roles {sorted(self.roles)}, not {name!r}")
        return RoleWorkerGroup(self, name)

    def execute(self, role: str, method: str, *args: Any, **kwargs: Any) -> Any:
        mode, pad = registered_methods(self.roles[role].cls)[method]
        per_rank, pad_size, order = dispatch_args(mode, self.world_size, args, kwargs, f"{role}.{method}", pad)
        t = time.perf_counter()
        refs = [w.execute.remote(role, method, a, kw) for w, (a, kw) in zip(self.workers, per_rank)]
        results = self._get(refs, role, method)
        self.overhead_s += max(0.0, time.perf_counter() - t - max(r[1] for r in results))
        self.calls += 1
        return collect_results(mode, [r[0] for r in results], pad_size, order)

    def pop_overhead_s(self) -> float:
        out, self.overhead_s = self.overhead_s, 0.0
        return out

    def _describe(self, rank: int) -> str:
        info = self.info[rank] if getattr(self, "info", None) else {}
        where = f" (pid {info['pid']} on {info['node']})" if info else ""
        return f"rank {rank} of {self.world_size}{where}"

    def _get(self, refs: list, role: str, method: str) -> list:
        """Results of ``refs`` in order; on the first failure, stop the group and raise one clear error."""
        import ray

        index = {ref: i for i, ref in enumerate(refs)}
        results: list = [None] * len(refs)
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                results[index[ready[0]]] = ray.get(ready[0])
            except Exception as first:
                errors = {index[ready[0]]: first}
                if pending:  # a dead peer makes the others fail too: report the process that died, not its peers
                    done, _ = ray.wait(pending, num_returns=len(pending), timeout=5)
                    for ref in done:
                        try:
                            ray.get(ref)
                        except Exception as e:
                            errors[index[ref]] = e
                self.shutdown()
                raise self._error(role, method, errors) from first
        return results

    def _error(self, role: str, method: str, errors: dict[int, BaseException]) -> WorkerGroupError:
        from ray.exceptions import RayActorError

        died = sorted(r for r, e in errors.items() if isinstance(e, RayActorError))
        if died:
            r = died[0]
            cause = str(errors[r]).strip().splitlines()[0][:300]
            return WorkerGroupError(
                f"worker process of role '{role}' {self._describe(r)} died during {method} ({cause}); "
                f"the other {self.world_size - 1} rank(s) were stopped"
            )
        r = min(errors)
        e = errors[r]
        cause = getattr(e, "cause", None) or e
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
        return WorkerGroupError(
            f"worker of role '{role}' {self._describe(r)} raised in {method}: {type(cause).__name__}: "
            f"{lines[-1].strip() if lines else cause}"
        )

    def shutdown(self) -> None:
        """Kill the worker processes (idempotent); the resource pool's placement groups stay for reuse."""
        if not self._alive:
            return
        self._alive = False
        import ray

        for w in self.workers:
            try:
                ray.kill(w, no_restart=True)
            except Exception:
                pass
