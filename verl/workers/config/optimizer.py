"""Optimizer sections: ``actor_rollout_ref.actor.optim`` and ``critic.optim`` (AdamW with warmup and decay)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

from verl.base_config import BaseConfig

__all__ = ["LR_SCHEDULER_TYPES", "FSDPOptimizerConfig", "McoreOptimizerConfig", "OptimizerConfig"]

LR_SCHEDULER_TYPES = ("constant", "cosine")


@dataclass
class OptimizerConfig(BaseConfig):
    """AdamW with linear warmup, then a constant or cosine learning rate.

    ``warmup_style`` is verl's older name of ``lr_scheduler_type``: when given it sets it (with a deprecation
    warning), as in verl."""

    _mutable_fields: ClassVar[frozenset[str]] = frozenset({"clip_grad", "total_training_steps", "lr_warmup_steps"})

    lr: float = 1.0e-3  # AdamW learning rate
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # AdamW betas
    # AdamW decoupled weight decay
    weight_decay: float = field(default=0.01, metadata={"api": ("OptimConfig.weight_decay",)})
    lr_warmup_steps: int | None = -1  # -1 or null: use lr_warmup_steps_ratio
    # warmup steps as a share of total_training_steps
    lr_warmup_steps_ratio: float = field(default=0.0, metadata={"api": ("OptimConfig.lr_warmup_steps_ratio",)})
    # constant | cosine (after the warmup)
    lr_scheduler_type: str = field(default="constant", metadata={"api": ("OptimConfig.warmup_style",)})
    warmup_style: str | None = None  # deprecated in verl: sets lr_scheduler_type when given
    min_lr_ratio: float | None = None  # cosine: the final lr as a share of lr (null: 0.0)
    num_cycles: float = 0.5  # cosine: cycles over the decay; 0.5 decays once from lr to lr * min_lr_ratio
    # no effect: the schedule's length is the run's (trainer.total_training_steps or the epochs' steps)
    total_training_steps: int = -1
    # the role's grad_clip clips the gradient norm here (actor.grad_clip, critic.grad_clip): another value is an error
    # naming that key
    clip_grad: float = 1.0

    def __post_init__(self) -> None:
        if self.warmup_style is not None:
            if self.warmup_style not in LR_SCHEDULER_TYPES:
                raise ValueError(
                    f"optim.warmup_style={self.warmup_style!r}: use one of {list(LR_SCHEDULER_TYPES)} (its current "
                    "name is lr_scheduler_type)"
                )
            warnings.warn(
                "optim.warmup_style is deprecated in verl: it sets optim.lr_scheduler_type; set that key instead",
                DeprecationWarning,
                stacklevel=2,
            )
            object.__setattr__(self, "lr_scheduler_type", self.warmup_style)
        if self.lr_scheduler_type not in LR_SCHEDULER_TYPES:
            raise ValueError(
                f"optim.lr_scheduler_type={self.lr_scheduler_type!r}: use one of {list(LR_SCHEDULER_TYPES)}"
            )


@dataclass
class FSDPOptimizerConfig(OptimizerConfig):
    """The optimizer of an FSDP-sharded role: verl's choice of optimizer class on top of `OptimizerConfig` (AdamW
    from torch.optim is the one built here; another class is an error naming the key)."""

    optimizer: str = "AdamW"  # the optimizer class; AdamW only (another is an error)
    optimizer_impl: str = "torch.optim"  # the module of that class; torch.optim only (another is an error)
    # extra optimizer constructor arguments: not passed in this version (a value is an error)
    override_optimizer_config: dict[str, Any] | None = None


@dataclass
class McoreOptimizerConfig(OptimizerConfig):
    """Megatron's optimizer settings (verl's ``McoreOptimizerConfig``). Megatron is not implemented: the class exists
    so configs written for it construct; a run uses the data-parallel worker and `FSDPOptimizerConfig`."""

    optimizer: str = "adam"  # Megatron optimizer name
    lr_warmup_init: float = 0.0  # lr at the start of the warmup
    lr_decay_steps: int | None = None  # decay steps (null: the run's)
    lr_decay_style: str = "linear"  # constant | linear | cosine | inverse_square_root
    min_lr: float = 0.0  # the lr the decay ends at
    weight_decay_incr_style: str = "constant"  # constant | linear | cosine
    lr_wsd_decay_style: str = "exponential"  # warmup-stable-decay: the decay's shape
    lr_wsd_decay_steps: int | None = None  # warmup-stable-decay: the decay's steps
    use_checkpoint_opt_param_scheduler: bool = False  # restore the scheduler from the checkpoint
    override_optimizer_config: dict[str, Any] | None = None  # extra Megatron optimizer arguments
