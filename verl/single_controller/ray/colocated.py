"""Several worker classes in one process (verl's colocated / fused workers): the actor and the critic, say, share
a GPU and a process, and call each other directly.

``create_colocated_worker_raw_cls({"actor": RayClassWithInitArgs(Actor), "critic": ...})`` returns a `Worker`
class that builds one of each in its ``__init__`` and keeps them as attributes (``self.actor``, ``self.critic``)
and in ``fused_worker_dict``; each inner worker also sees ``fused_worker_dict``. A worker group of that class
calls an inner worker's registered methods as ``group.actor.add(x)`` after ``group.fuse(["actor", "critic"])``.
``create_colocated_worker_cls`` (in ``verl.single_controller.ray.base``, beside the ``RayClassWithInitArgs`` it
returns) wraps the same class for a worker group, with the inner methods also bound as ``<name>_<method>``
(`bind_inner_methods`; verl's older form: ``group.actor_add(x)``).
"""

from __future__ import annotations

import functools
from typing import Any

from verl.single_controller.base.decorator import CALL_ATTR, MAGIC_ATTR, PAD_ATTR, registered_methods
from verl.single_controller.base.worker import Worker

__all__ = ["bind_inner_methods", "create_colocated_worker_raw_cls", "unwrap_ray_remote"]


def unwrap_ray_remote(cls: Any) -> type:
    """The Python class behind a ``@ray.remote`` class (the class itself otherwise)."""
    return getattr(cls, "__ray_actor_class__", cls)


def create_colocated_worker_raw_cls(class_dict: dict[str, Any]) -> type:
    """A `Worker` class holding one worker per entry of ``class_dict`` ({name: class with init args})."""
    raw_cls_dict = {name: unwrap_ray_remote(spec.cls) for name, spec in class_dict.items()}
    init = {name: (tuple(spec.args), dict(spec.kwargs)) for name, spec in class_dict.items()}

    class FusedWorker(Worker):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.fused_worker_dict: dict[str, Any] = {}
            for name, cls in raw_cls_dict.items():
                inner_args, inner_kwargs = init[name]
                self.fused_worker_dict[name] = cls(*inner_args, **inner_kwargs)
                setattr(self, name, self.fused_worker_dict[name])
            for inner in self.fused_worker_dict.values():  # each inner worker can reach the others
                inner.fused_worker_dict = self.fused_worker_dict

        def bind_device(self, device: str) -> None:
            super().bind_device(device)
            for inner in self.fused_worker_dict.values():
                if hasattr(inner, "bind_device"):
                    inner.bind_device(device)

    name = "_".join(["FusedWorker", *raw_cls_dict])
    return type(name, (FusedWorker,), {"raw_cls_dict": raw_cls_dict, "is_fused_worker": True})


def bind_inner_methods(fused: type) -> type:
    """``fused`` (a `create_colocated_worker_raw_cls` class) with every inner registered method also bound as
    ``<name>_<method>``; ``verl.single_controller.ray.base.create_colocated_worker_cls`` wraps the result."""
    for inner_name, inner_cls in fused.raw_cls_dict.items():
        for method in registered_methods(inner_cls):
            setattr(fused, f"{inner_name}_{method}", _forward(inner_name, getattr(inner_cls, method), method))
    return fused


def _forward(inner_name: str, fn: Any, method: str) -> Any:
    @functools.wraps(fn)
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.fused_worker_dict[inner_name], method)(*args, **kwargs)

    for attr in (MAGIC_ATTR, PAD_ATTR, CALL_ATTR):
        if hasattr(fn, attr):
            setattr(forward, attr, getattr(fn, attr))
    return forward
