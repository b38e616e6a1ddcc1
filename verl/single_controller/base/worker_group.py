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

from verl.single_controller.base.decorator import Dispatch, registered_methods


class WorkerGroupError(RuntimeError):
    """A worker of a group died or raised during a call; the group has been stopped."""


@dataclass
class ClassWithInitArgs:
    """A role's worker class and the arguments each rank constructs it with."""

    cls: type
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def build(self, device: str) -> Any:
        """One worker of this role on ``device`` (``cpu`` or ``cuda``), constructed in the calling process."""
        worker = self.cls(*self.args, **self.kwargs)
        worker.bind_device(device)
        return worker


class RoleWorkerGroup:
    """One role of a group as the controller sees it: its ``@register``-ed methods, as plain calls."""

    def __init__(self, group: Any, role: str):
        self._group, self._role = group, role
        self._methods = registered_methods(group.roles[role].cls)

    @property
    def world_size(self) -> int:
        return self._group.world_size

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_group", "_role", "_methods"):
            raise AttributeError(name)
        if name in self._methods:
            return lambda *args, **kwargs: self._group.execute(self._role, name, *args, **kwargs)
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

    def role(self, name: str) -> RoleWorkerGroup:
        if name not in self.roles:
            raise KeyError(f"worker group has roles {sorted(self.roles)}, not {name!r}")
        return RoleWorkerGroup(self, name)

    def worker(self, role: str) -> Any:
        return self._workers[role]

    def execute(self, role: str, method: str, *args: Any, **kwargs: Any) -> Any:
        mode, _ = registered_methods(self.roles[role].cls)[method]
        out = getattr(self._workers[role], method)(*args, **kwargs)
        return [out] if mode == Dispatch.ONE_TO_ALL else out

    def pop_overhead_s(self) -> float | None:
        """Seconds of the last calls spent outside the workers' compute: none in one process (None: not measured)."""
        return None

    def shutdown(self) -> None:
        """Nothing to stop: the workers live and die with the controller's process."""
