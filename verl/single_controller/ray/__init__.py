"""Ray backend of the single controller (imports Ray lazily: ``import verl`` works without it)."""

from verl.single_controller.ray.base import (
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    RoleWorkerGroup,
    WorkerGroupError,
)

__all__ = ["RayClassWithInitArgs", "RayResourcePool", "RayWorkerGroup", "RoleWorkerGroup", "WorkerGroupError"]
