"""Optimizer sections: ``actor_rollout_ref.actor.optim`` and ``critic.optim`` (AdamW with warmup and decay)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig

__all__ = ["FSDPOptimizerConfig", "OptimizerConfig"]


@dataclass
class OptimizerConfig(BaseConfig):
    """AdamW with linear warmup, then a constant or cosine learning rate."""

    lr: float = 1.0e-3  # AdamW learning rate
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # AdamW betas
    weight_decay: float = 0.01  # AdamW decoupled weight decay
    lr_warmup_steps: int = -1  # -1: use lr_warmup_steps_ratio
    lr_warmup_steps_ratio: float = 0.0  # warmup steps as a share of total_training_steps
    warmup_style: str = "constant"  # constant | cosine
    min_lr_ratio: float = 0.0  # cosine: the final lr as a share of lr


@dataclass
class FSDPOptimizerConfig(OptimizerConfig):
    """The optimizer of an FSDP-sharded role (verl's name; the same keys here)."""
