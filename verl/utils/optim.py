"""AdamW with a warmup-then-decay learning-rate schedule: the one optimizer recipe every trainer here uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from verl.utils.torch_functional import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

SCHEDULES = ("constant", "cosine")


def build_adamw(
    params: Iterable[torch.nn.Parameter],
    lr: float,
    betas: Sequence[float],
    weight_decay: float,
    total_steps: int,
    warmup_steps: int = 0,
    schedule: str = "constant",
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW plus linear warmup over ``warmup_steps``, then ``constant`` or ``cosine`` decay to ``lr*min_lr_ratio``
    (``num_cycles`` cosine cycles over the decay; 0.5 decays once)."""
    optimizer = torch.optim.AdamW(params, lr=lr, betas=tuple(betas), weight_decay=weight_decay)
    if schedule == "cosine":
        scheduler = get_cosine_schedule_with_warmup(
            optimizer, warmup_steps, total_steps, min_lr_ratio=min_lr_ratio, num_cycles=num_cycles
        )
    elif schedule == "constant":
        scheduler = get_constant_schedule_with_warmup(optimizer, warmup_steps)
    else:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}: use one of {SCHEDULES}")
    return optimizer, scheduler


def scale_lr_schedule(scheduler: torch.optim.lr_scheduler.LambdaLR, scale: float) -> None:
    """Make ``scheduler`` (a `build_adamw` schedule) run at ``scale`` times its configured peak learning rate from
    now on, keeping its step (warmup and decay go on where they are): the collapse guard's rollback. ``scale`` is
    against the configured rate, not the current one, so calling it twice with the same value changes nothing."""
    if not hasattr(scheduler, "configured_base_lrs"):
        scheduler.configured_base_lrs = [group["initial_lr"] for group in scheduler.optimizer.param_groups]
    scheduler.base_lrs = [base * scale for base in scheduler.configured_base_lrs]
    for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * factor(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]  # what get_last_lr() reports
