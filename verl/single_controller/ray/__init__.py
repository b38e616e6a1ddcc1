"""Ray backend of the single controller (imports Ray lazily: ``import verl`` works without it)."""

from verl.single_controller.ray.base import (
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    RoleWorkerGroup,
    WorkerGroupError,
    create_colocated_worker_cls,
    create_colocated_worker_raw_cls,
)

__all__ = [
    "RayClassWithInitArgs",
    "RayResourcePool",
    "RayWorkerGroup",
    "RoleWorkerGroup",
    "WorkerGroupError",
    "create_colocated_worker_cls",
    "create_colocated_worker_raw_cls",
]
