"""Worker groups: the controller's handle on the workers of one or more roles, whatever runs them.

A group is built from ``{role name: ClassWithInitArgs}`` (the worker class of each role and its constructor
arguments) and a device. ``group.role(name)`` is what the controller calls: every ``@register``-ed method of the
role's class, spread over the group's ranks and gathered back by its dispatch mode. Two implementations share this
contract: `LocalWorkerGroup` (one rank in the controller's process; ``trainer.backend=local``) and
``verl.single_controller.ray.RayWorkerGroup`` (one Ray actor process per rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.single_controller.base.decorator import CallOptions, Dispatch, call_options, registered_methods


class WorkerGroupError(RuntimeError):
    """A worker of a group died or raised during a call; the group has been stopped."""


def resolve_method(worker: Any, method: str) -> Any:
    """``worker.<method>``, where ``method`` may name an inner worker's method (``"actor.add"``)."""
    target = worker
    for part in method.split("."):
        target = getattr(target, part)
    return target


def method_mode(cls: type, method: str) -> tuple[Any, bool, CallOptions]:
    """``(dispatch mode, pad, call options)`` of ``cls``'s registered ``method`` (``"member.name"``: an inner
    worker's, found through the class's ``raw_cls_dict`` of verl's fused workers)."""
    if "." in method:
        member, name = method.split(".", 1)
        inner = getattr(cls, "raw_cls_dict", {}).get(member)
        if inner is None:
            raise AttributeError(f"{cls.__name__} has no inner worker {member!r} (fused classes: raw_cls_dict)")
        return method_mode(inner, name)
    methods = registered_methods(cls)
    if method not in methods:
        raise AttributeError(f"{cls.__name__}.{method} is not a @register-ed method")
    return (*methods[method], call_options(cls, method))


@dataclass
class ClassWithInitArgs:
    """A role's worker class and the arguments each rank constructs it with."""

    cls: type
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    # calls one worker process may run at once (Ray: the actor's max_concurrency): above 1 for a role whose calls
    # mostly wait (a rollout replica running agent loops with slow tools); its worker makes them thread-safe
    max_concurrency: int = 1

    def build(self, device: str) -> Any:
        """One worker of this role on ``device`` (``cpu`` or ``cuda``), constructed in the calling process (a class
        that is not a `Worker` is built as it is)."""
        worker = self.cls(*self.args, **self.kwargs)
        if hasattr(worker, "bind_device"):
            worker.bind_device(device)
        return worker


class RoleWorkerGroup:
    """One role of a group as the controller sees it: its ``@register``-ed methods, as plain calls.

    ``member`` (verl's fused workers): the methods of the role worker's attribute of that name, an inner worker
    of a colocated class (``group.actor.add(x)`` runs ``worker.actor.add(x)`` on every rank)."""

    def __init__(self, group: Any, role: str, member: str | None = None, member_cls: type | None = None):
        self._group, self._role, self._member = group, role, member
        self._methods = registered_methods(member_cls if member_cls is not None else group.roles[role].cls)

    @property
    def world_size(self) -> int:
        return self._group.world_size

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_group", "_role", "_methods", "_member"):
            raise AttributeError(name)
        if name in self._methods:
            method = name if self._member is None else f"{self._member}.{name}"
            return lambda *args, **kwargs: self._group.execute(self._role, method, *args, **kwargs)
        local = getattr(self._group, "worker", None)
        if local is not None:  # in the controller's process the worker's own attributes are readable
            return getattr(local(self._role), name)
        raise AttributeError(f"role '{self._role}' has no registered method {name!r}")


class LocalWorkerGroup:
    """A worker group of size one in the controller's process: each role's worker is built in place on ``device``,
    and a call runs the method directly (a batch needs no split, a result no gathering; ``ONE_TO_ALL`` calls return
    a one-item list, as a group of one rank does)."""

    def __init__(self, roles: dict[str, ClassWithInitArgs], device: str = "cpu"):
        self.roles = dict(roles)
        self.world_size = 1
        self._workers = {name: spec.build(device) for name, spec in self.roles.items()}
        for worker in self._workers.values():
            worker._local_backend = True  # one process: never a shard of a process group

    def role(self, name: str) -> RoleWorkerGroup:
        if name not in self.roles:
            raise KeyError(f"worker group has roles {sorted(self.roles)}, not {name!r}")
        return RoleWorkerGroup(self, name)

    def worker(self, role: str) -> Any:
        return self._workers[role]

    def execute(self, role: str, method: str, *args: Any, **kwargs: Any) -> Any:
        mode, _, _ = method_mode(self.roles[role].cls, method)
        out = resolve_method(self._workers[role], method)(*args, **kwargs)
        return [out] if mode in (Dispatch.ONE_TO_ALL, Dispatch.ALL_TO_ALL, Dispatch.DP_COMPUTE) else out

    def pop_overhead_s(self) -> float | None:
        """Seconds of the last calls spent outside the workers' compute: none in one process (None: not measured)."""
        return None

    def shutdown(self) -> None:
        """Nothing to stop: the workers live and die with the controller's process."""
