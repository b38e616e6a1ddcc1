"""What a role's checkpoint holds: the ``checkpoint`` section of the actor and the critic (and of the SFT job).
verl's path for it is ``verl.trainer.config.CheckpointConfig``, which imports it from here."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig

__all__ = ["CheckpointConfig"]


@dataclass
class CheckpointConfig(BaseConfig):
    """What a role's checkpoint holds (verl's keys; here every checkpoint holds everything)."""

    # no effect: checkpoints always hold the model, optimizer, extra state and an HF copy
    save_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])
    # no effect: a resume restores everything saved
    load_contents: list[str] = field(default_factory=lambda: ["model", "optimizer", "extra"])
    async_save: bool = False  # write checkpoints in the background: not implemented (true warns; saved in the step)
