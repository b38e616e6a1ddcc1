"""Sections shared by several jobs (verl's ``verl.trainer.config.config``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig

__all__ = ["CheckpointConfig", "ModuleConfig"]


@dataclass
class CheckpointConfig(BaseConfig):
    """What a role's checkpoint holds (verl's keys; here every checkpoint holds everything)."""

    # no effect: checkpoints always hold the model, optimizer, extra state and an HF copy
    save_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])
    # no effect: a resume restores everything saved
    load_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])


@dataclass
class ModuleConfig(BaseConfig):
    """A class or function in a Python file (verl's custom dataset / custom reward hooks)."""

    path: str | None = None  # a Python file
    name: str | None = None  # the class or function in it
