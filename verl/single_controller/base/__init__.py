from verl.single_controller.base.decorator import Dispatch, register
from verl.single_controller.base.worker import Worker
from verl.single_controller.base.worker_group import (
    ClassWithInitArgs,
    LocalWorkerGroup,
    RoleWorkerGroup,
    WorkerGroupError,
)

__all__ = [
    "ClassWithInitArgs",
    "Dispatch",
    "LocalWorkerGroup",
    "RoleWorkerGroup",
    "Worker",
    "WorkerGroupError",
    "register",
]
