"""Sections shared by several jobs (verl's ``verl.trainer.config.config``). ``CheckpointConfig`` is a role's
section too, so it lives in ``verl.workers.config.checkpoint`` (the workers' schemas import it) and is imported
here under verl's path."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.utils.dataset.data_config import ModuleConfig
from verl.workers.config.checkpoint import CheckpointConfig

__all__ = ["CheckpointConfig", "ModuleConfig", "RewardManagerConfig"]


@dataclass
class RewardManagerConfig(BaseConfig):
    """Which reward manager turns responses into token-level scores (verl's top-level ``reward_manager``): one
    registered by name, or a class loaded from a file."""

    source: str = "register"  # register: a manager registered by name | importlib: the class in module
    name: str = "naive"  # (derived) the registered manager, or importlib's class: follows reward_model.reward_manager
    # importlib: the Python file holding the class `name`
    module: ModuleConfig = field(default_factory=lambda: ModuleConfig(name="custom_reward_manager"))
