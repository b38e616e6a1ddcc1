"""Worker groups as Ray actors: resource pools backed by placement groups, one process per rank, colocated roles.

A ``RayResourcePool`` reserves ``process_on_nodes[i]`` bundles on node i (one placement group per node, packed on
that node); each bundle holds one worker process (a CPU on CPU runs, a GPU on GPU runs). A ``RayWorkerGroup``
starts one ``WorkerProcess`` actor per bundle, joins them in a torch process group (gloo on CPU, NCCL on GPU) and
builds the role workers inside them: several roles in one group share the processes and devices (verl's
colocation: actor + rollout + reference, and the critic unless it has its own pool). ``group.role(name)`` is what
the controller calls: every ``@register``-ed method of the role's class, spread and gathered by its dispatch mode.

A failed call (a worker process died, or raised) kills the group and raises `WorkerGroupError` naming the role,
rank, pid and node, so a dead peer never leaves the others hanging in a collective.

verl's construction works too: ``RayWorkerGroup(resource_pool, RayClassWithInitArgs(cls=MyWorker, ...))`` with a
``@ray.remote`` `Worker` subclass. The group is then one role; its ``@register``-ed methods are the group's own
(``wg.update(data)``), ``execute_all_sync(name, ...)`` calls any method on every rank, and the workers find their
place in environment variables (``RANK``, ``WORLD_SIZE``, ``RAY_LOCAL_WORLD_SIZE``, ``RAY_LOCAL_RANK``,
``MASTER_ADDR``/``MASTER_PORT``, plus ``worker_env``), initialising ``torch.distributed`` themselves, as verl's
workers do. Colocated classes (``create_colocated_worker_raw_cls``) expose their inner workers after
``wg.fuse(names)`` as ``wg.<name>.<method>``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import time
from datetime import timedelta
from typing import Any

from verl.single_controller.base.decorator import (
    Dispatch,
    Execute,
    collect_results,
    dispatch_args,
    registered_methods,
    split_per_rank,
)
from verl.single_controller.base.worker_group import (
    ClassWithInitArgs,
    RoleWorkerGroup,
    WorkerGroupError,
    method_mode,
    resolve_method,
)
from verl.single_controller.ray.colocated import bind_inner_methods, create_colocated_worker_raw_cls, unwrap_ray_remote
from verl.utils.import_utils import require

__all__ = [
    "RayClassWithInitArgs",
    "RayResourcePool",
    "RayWorkerGroup",
    "RoleWorkerGroup",
    "WorkerGroupError",
    "create_colocated_worker_cls",
    "create_colocated_worker_raw_cls",
]

# set by the group for every rank of a verl-style group; a worker_env may not override them
PROTECTED_ENV = ("WORLD_SIZE", "RANK", "WG_PREFIX", "WG_BACKEND", "RAY_LOCAL_WORLD_SIZE", "RAY_LOCAL_RANK")
PROTECTED_ENV += ("MASTER_ADDR", "MASTER_PORT")


class RayClassWithInitArgs(ClassWithInitArgs):
    """A role's worker class and its constructor arguments, built inside each Ray worker process (verl's name and
    signature: ``RayClassWithInitArgs(cls=MyWorker, arg, key=value)``; ``cls`` may be a ``@ray.remote`` class)."""

    def __init__(self, cls: type, *args: Any, **kwargs: Any) -> None:
        super().__init__(cls, args, kwargs)
        self.fused_worker_used = False  # verl's flag for colocated classes; a fused class is recognised by itself
        self._options: dict[str, Any] = {}

    def update_options(self, options: dict[str, Any]) -> None:
        """Extra Ray actor options (verl's method; kept for inspection, the group sets placement itself)."""
        self._options.update(options)


def create_colocated_worker_cls(class_dict: dict[str, Any]) -> RayClassWithInitArgs:
    """`create_colocated_worker_raw_cls` with every inner registered method also bound as ``<name>_<method>``,
    wrapped as a ``RayClassWithInitArgs`` for a worker group."""
    return RayClassWithInitArgs(cls=bind_inner_methods(create_colocated_worker_raw_cls(class_dict)))


class RayResourcePool:
    """``process_on_nodes``: worker processes per node, e.g. ``[2, 2]`` for 2 nodes x 2. ``use_gpu``: one GPU per
    process; otherwise ``cpus_per_worker`` logical CPUs. ``max_colocate_count``: how many groups may place a process
    in each bundle (verl's colocation of several worker groups on one pool; 1 here by default: one group per pool,
    its roles sharing the processes). ``name_prefix`` is verl's name for ``name``."""

    def __init__(
        self,
        process_on_nodes: list[int] | None = None,
        use_gpu: bool = False,
        name: str = "global_pool",
        cpus_per_worker=1,
        *,
        name_prefix: str | None = None,
        max_colocate_count: int = 1,
        detached: bool = False,
        accelerator_type: str | None = None,
    ):
        name = name_prefix or name
        if not process_on_nodes or min(process_on_nodes) < 1:
            raise ValueError(f"resource pool {name!r}: processes per node must be >= 1, got {process_on_nodes}")
        if max_colocate_count < 1:
            raise ValueError(f"resource pool {name!r}: max_colocate_count must be >= 1, got {max_colocate_count}")
        self.process_on_nodes = list(process_on_nodes)
        self.use_gpu = use_gpu
        self.name = name
        self.cpus_per_worker = cpus_per_worker
        self.max_colocate_count = max_colocate_count
        self._pgs: list | None = None

    @property
    def world_size(self) -> int:
        return sum(self.process_on_nodes)

    @property
    def store(self) -> list[int]:
        """verl's name for ``process_on_nodes``."""
        return self.process_on_nodes

    def placement_groups(self, timeout_s: float = 60.0) -> list:
        if self._pgs is None:
            ray = require("ray", "ray[default]", "the Ray backend (trainer.backend=ray)")
            from ray.util.placement_group import placement_group

            cpus = self.cpus_per_worker * self.max_colocate_count
            bundle = {"CPU": cpus, **({"GPU": 1} if self.use_gpu else {})}
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
        if env.get("VERL_DETERMINISTIC") == "1":  # trainer.deterministic
            from verl.utils.torch_functional import enable_deterministic

            enable_deterministic()
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

    def update_env(self, env: dict[str, str]) -> None:
        os.environ.update(env)

    def add_role(self, name: str, spec: ClassWithInitArgs, device: str) -> None:
        self.workers[name] = spec.build(device)

    def call(self, role: str, method: str, args: tuple, kwargs: dict) -> Any:
        """``role.method(*args, **kwargs)`` (``method`` may be ``"inner.name"``; an ``async def`` runs to its end)."""
        out = resolve_method(self.workers[role], method)(*args, **kwargs)
        return asyncio.run(out) if inspect.iscoroutine(out) else out

    def execute(self, role: str, method: str, args: tuple, kwargs: dict) -> tuple[Any, float]:
        """`call`, with its compute seconds on this rank."""
        t = time.perf_counter()
        out = self.call(role, method, args, kwargs)
        return out, time.perf_counter() - t


class RayWorkerGroup:
    """Worker processes on ``resource_pool``, each holding one worker per entry of ``roles``; or, verl's way, one
    worker of ``ray_cls_with_init`` (module docstring). verl's other options (``bin_pack``, ``detached``,
    ``ray_wait_register_center_timeout``, ...) are accepted and have no effect: bundles are always packed per node
    and the workers live as long as the group."""

    def __init__(
        self,
        resource_pool: RayResourcePool,
        roles: dict[str, ClassWithInitArgs] | ClassWithInitArgs | None = None,
        device: str | None = None,
        env: dict[str, str] | None = None,
        num_threads: int = 1,
        dist_timeout_s: float = 600.0,
        *,
        ray_cls_with_init: ClassWithInitArgs | None = None,
        name_prefix: str | None = None,
        worker_env: dict[str, str] | None = None,
        **verl_options: Any,
    ):
        ray = require("ray", "ray[default]", "the Ray backend (trainer.backend=ray)")
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if roles is not None and not isinstance(roles, dict):  # verl: RayWorkerGroup(resource_pool, cls_with_init)
            roles, ray_cls_with_init = None, roles
        self._default_role: str | None = None
        if ray_cls_with_init is not None:
            if roles:
                raise ValueError("RayWorkerGroup: give roles or ray_cls_with_init, not both")
            roles, env = self._verl_style_roles(ray_cls_with_init, env, worker_env, name_prefix)
        if not roles:
            raise ValueError("RayWorkerGroup needs roles ({name: ClassWithInitArgs}) or ray_cls_with_init")
        device = device or ("cuda" if resource_pool.use_gpu else "cpu")
        self.resource_pool = resource_pool
        self.roles = dict(roles)
        self.world_size = resource_pool.world_size
        self.name_prefix = name_prefix or resource_pool.name
        self.overhead_s = 0.0  # driver wall time of calls minus the slowest rank's compute: Ray + transfer cost
        self.calls = 0
        self._alive = True
        env = dict(env or {})
        remote = ray.remote(WorkerProcess)
        self.workers = []
        # (node size, local rank) of every rank, for a verl-style group's environment
        placement = [(n, j) for n in resource_pool.process_on_nodes for j in range(n)]
        for rank, (pg, index) in enumerate(resource_pool.bundles()):
            rank_env = dict(env)
            if self._default_role is not None:
                node_size, local_rank = placement[rank]
                rank_env.update(
                    WORLD_SIZE=str(self.world_size),
                    RANK=str(rank),
                    RAY_LOCAL_WORLD_SIZE=str(node_size),
                    RAY_LOCAL_RANK=str(local_rank),
                )
            options = {
                "num_cpus": resource_pool.cpus_per_worker,
                "num_gpus": 1 / resource_pool.max_colocate_count if resource_pool.use_gpu else 0,
                "max_restarts": 0,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=index),
                "runtime_env": {"env_vars": rank_env},
                "max_concurrency": max(getattr(spec, "max_concurrency", 1) for spec in self.roles.values()),
                "name": f"{self.name_prefix}_{'+'.join(roles)}_rank{rank}_{os.getpid()}_{id(self)}",
            }
            self.workers.append(remote.options(**options).remote(rank, self.world_size, rank_env, num_threads))
        what = "+".join(roles)
        self.info = self._get([w.info.remote() for w in self.workers], what, "start")
        addr, port = self._get([self.workers[0].master_address.remote()], what, "start")[0]
        if self._default_role is not None:  # verl's workers join the process group themselves, from these
            master = {"MASTER_ADDR": addr, "MASTER_PORT": str(port)}
            self._get([w.update_env.remote(master) for w in self.workers], what, "start")
        else:
            backend = "nccl" if device == "cuda" else "gloo"
            self._get(
                [w.init_process_group.remote(addr, port, backend, dist_timeout_s) for w in self.workers],
                what,
                "init_process_group",
            )
        for name, spec in self.roles.items():
            self._get([w.add_role.remote(name, spec, device) for w in self.workers], name, "__init__")

    def _verl_style_roles(
        self, spec: ClassWithInitArgs, env: dict | None, worker_env: dict | None, name_prefix: str | None
    ) -> tuple[dict[str, ClassWithInitArgs], dict[str, str]]:
        """The one role of a verl-style group and the environment its ranks share (module docstring)."""
        cls = unwrap_ray_remote(spec.cls)
        clash = sorted(set(worker_env or {}) & set(PROTECTED_ENV))
        if clash:
            raise ValueError(
                f"RayWorkerGroup worker_env may not set {clash}: the group sets them for every rank "
                f"({', '.join(PROTECTED_ENV)})"
            )
        self._default_role = cls.__name__
        shared = {
            **(env or {}),
            "WG_BACKEND": "ray",
            "WG_PREFIX": name_prefix or "",
            **(worker_env or {}),
        }
        return {cls.__name__: ClassWithInitArgs(cls, tuple(spec.args), dict(spec.kwargs))}, shared

    def role(self, name: str) -> RoleWorkerGroup:
        if name not in self.roles:
            raise KeyError(f"worker group has roles {sorted(self.roles)}, not {name!r}")
        return RoleWorkerGroup(self, name)

    def __getattr__(self, name: str) -> Any:
        """A verl-style group's registered methods are its own: ``wg.method(...)``."""
        role, roles = self.__dict__.get("_default_role"), self.__dict__.get("roles")
        if role is None or roles is None or name.startswith("_") or name not in registered_methods(roles[role].cls):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self.role(role), name)

    def execute(self, role: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the registered ``role.method`` on the group's ranks as its dispatch mode says (decorator module)."""
        mode, pad, options = method_mode(self.roles[role].cls, method)
        what = f"{role}.{method}"
        if options.materialize_futures:
            args, kwargs = _materialized(args, kwargs)
        if isinstance(mode, dict):  # a custom dispatch: verl's {"dispatch_fn", "collect_fn"}
            split_args, split_kwargs = mode["dispatch_fn"](self, *args, **kwargs)
            per_rank = split_per_rank(self.world_size, tuple(split_args), dict(split_kwargs), what)
            pad_size, order = 0, None
        else:
            per_rank, pad_size, order = dispatch_args(mode, self.world_size, args, kwargs, what, pad)
        if options.execute_mode == Execute.RANK_ZERO:
            per_rank = per_rank[:1]
        if not options.blocking:
            refs = [w.call.remote(role, method, a, kw) for w, (a, kw) in zip(self.workers, per_rank)]
            return self._pending(mode, refs, pad_size, order)
        t = time.perf_counter()
        refs = [w.execute.remote(role, method, a, kw) for w, (a, kw) in zip(self.workers, per_rank)]
        results = self._get(refs, role, method)
        self.overhead_s += max(0.0, time.perf_counter() - t - max(r[1] for r in results))
        self.calls += 1
        outputs = [r[0] for r in results]
        if isinstance(mode, dict):
            return mode["collect_fn"](self, outputs)
        if options.execute_mode == Execute.RANK_ZERO:
            return outputs[0]
        return collect_results(mode, outputs, pad_size, order)

    def _pending(self, mode: Any, refs: list, pad_size: int, order: list[int] | None) -> Any:
        """A non-blocking call's result: a ``DataProtoFuture`` for DataProto modes (rows restored on ``get``),
        else the Ray object refs, one per rank."""
        if isinstance(mode, dict):
            return mode["collect_fn"](self, refs)
        if mode != Dispatch.DP_COMPUTE_PROTO:
            return refs
        from verl.protocol import DataProto, DataProtoFuture

        def restore(out: DataProto) -> DataProto:
            return collect_results(mode, [out], pad_size, order)

        restoring = pad_size or order is not None
        return DataProtoFuture(collect_fn=DataProto.concat, futures=refs, dispatch_fn=restore if restoring else None)

    def _single_role(self, what: str) -> str:
        if self._default_role is not None:
            return self._default_role
        if len(self.roles) == 1:
            return next(iter(self.roles))
        raise ValueError(f"{what}: this group holds roles {sorted(self.roles)}; call group.role(name).<method>")

    def execute_all_async(self, method_name: str, *args: Any, **kwargs: Any) -> list:
        """Ray object refs of ``method_name`` (any method of the worker) on every rank; an argument given as a list
        of ``world_size`` items (all of them so) gives rank r its r-th item (verl's rule)."""
        role = self._single_role("execute_all")
        per_rank = split_per_rank(self.world_size, args, kwargs, method_name)
        return [w.call.remote(role, method_name, a, kw) for w, (a, kw) in zip(self.workers, per_rank)]

    execute_all = execute_all_async

    def execute_all_sync(self, method_name: str, *args: Any, **kwargs: Any) -> list:
        """`execute_all_async`'s results, one per rank (a failure stops the group with one clear error)."""
        return self._get(self.execute_all_async(method_name, *args, **kwargs), self._single_role(""), method_name)

    def execute_rank_zero_async(self, method_name: str, *args: Any, **kwargs: Any) -> Any:
        return self.workers[0].call.remote(self._single_role("execute_rank_zero"), method_name, args, kwargs)

    execute_rank_zero = execute_rank_zero_async

    def execute_rank_zero_sync(self, method_name: str, *args: Any, **kwargs: Any) -> Any:
        ref = self.execute_rank_zero_async(method_name, *args, **kwargs)
        return self._get([ref], self._single_role(""), method_name)[0]

    def spawn(self, prefix_set: Any) -> dict[str, RoleWorkerGroup]:
        """``{name: the group of inner worker name}`` of a colocated class (`create_colocated_worker_raw_cls`)."""
        role = self._single_role("spawn")
        inner = getattr(self.roles[role].cls, "raw_cls_dict", {})
        missing = sorted(set(prefix_set) - set(inner))
        if missing:
            raise ValueError(f"spawn/fuse: {self.roles[role].cls.__name__} has no inner workers {missing}")
        return {name: RoleWorkerGroup(self, role, member=name, member_cls=inner[name]) for name in prefix_set}

    def fuse(self, prefix_set: Any) -> None:
        """Make each inner worker's group an attribute: ``wg.actor.add(x)`` (verl's colocated groups)."""
        for name, group in self.spawn(prefix_set).items():
            setattr(self, name, group)

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
        # the worker's own exception: its message, then its notes (the last line of Ray's traceback text is the
        # last note when there are any, which alone would hide the message)
        detail = str(cause).strip() if cause is not e else ""
        if not detail:
            lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
            detail = lines[-1].strip() if lines else repr(e)
        detail = " ".join([detail, *getattr(cause, "__notes__", [])])
        return WorkerGroupError(
            f"worker of role '{role}' {self._describe(r)} raised in {method}: {type(cause).__name__}: {detail}"
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


def _materialized(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with every ``DataProtoFuture`` replaced by its value."""
    from verl import protocol

    future = getattr(protocol, "DataProtoFuture", None)
    if future is None:
        return args, kwargs
    args = tuple(a.get() if isinstance(a, future) else a for a in args)
    return args, {k: v.get() if isinstance(v, future) else v for k, v in kwargs.items()}
