"""Sections shared by several jobs (verl's ``verl.trainer.config.config``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig

__all__ = ["CheckpointConfig", "ModuleConfig", "RewardManagerConfig"]


@dataclass
class CheckpointConfig(BaseConfig):
    """What a role's checkpoint holds (verl's keys; here every checkpoint holds everything)."""

    # no effect: checkpoints always hold the model, optimizer, extra state and an HF copy
    save_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])
    # no effect: a resume restores everything saved
    load_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])
    async_save: bool = False  # write checkpoints in the background: not implemented (true warns; saved in the step)


@dataclass
class ModuleConfig(BaseConfig):
    """A class or function in a Python file (verl's custom dataset / custom reward hooks)."""

    path: str | None = None  # a Python file
    name: str | None = None  # the class or function in it


@dataclass
class RewardManagerConfig(BaseConfig):
    """Which reward manager turns responses into token-level scores (verl's top-level ``reward_manager``): one
    registered by name, or a class loaded from a file."""

    source: str = "register"  # register: a manager registered by name | importlib: the class in module
    name: str = "naive"  # (derived) the registered manager, or importlib's class: follows reward_model.reward_manager
    # importlib: the Python file holding the class `name`
    module: ModuleConfig = field(default_factory=lambda: ModuleConfig(name="custom_reward_manager"))
