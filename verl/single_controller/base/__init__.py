from verl.single_controller.base.decorator import Dispatch, register
from verl.single_controller.base.worker import Worker

__all__ = ["Dispatch", "Worker", "register"]
