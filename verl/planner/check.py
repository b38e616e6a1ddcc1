"""``trainer.check_memory``: before any model is read, the planner's estimate of the run's peak memory per device
against what the device has; a run that would not fit fails at once with the planner's numbers, instead of an
out-of-memory error an hour in."""

from __future__ import annotations

from typing import Any

from verl.planner.from_config import plan_inputs_from_config
from verl.planner.hardware import GIB, Device, this_machine
from verl.planner.memory import MemoryEstimate, estimate_memory, format_estimate


class MemoryCheckError(ValueError):
    """The run's estimated peak exceeds the device's memory (a config error: the CLI prints it as one)."""


def check_memory(config: Any, device: Device | None = None, validation_rows: int | None = None) -> MemoryEstimate:
    """The run's estimate; raises `MemoryCheckError` when its peak exceeds ``device`` (default: this machine's
    available memory, or its first GPU's free memory). On CPU every worker process of the run shares the host."""
    device = device or this_machine()
    inputs = plan_inputs_from_config(config, device, validation_rows=validation_rows)
    est = estimate_memory(inputs)
    processes = inputs.world_size if device.platform == "cpu" else 1
    need = est.peak_bytes * processes
    if need > device.memory_bytes:
        where = "available host memory" if device.platform == "cpu" else f"free memory of {device.name}"
        who = f" x {processes} worker processes" if processes > 1 else ""
        raise MemoryCheckError(
            f"trainer.check_memory: the run needs about {need / GIB:.2f} GiB at its peak ({est.peak_phase}{who}), "
            f"more than the {device.memory_bytes / GIB:.2f} GiB {where}. The planner's estimate per device:\n"
            f"{format_estimate(est)}\nLower the largest term (micro-batch sizes or token budgets "
            "ppo_max_token_len_per_gpu / log_prob_max_token_len_per_gpu, rollout batch or lengths), turn on "
            "actor_rollout_ref.model.enable_gradient_checkpointing or LoRA, plan a configuration with "
            "`python scripts/auto_config.py`, or run anyway with trainer.check_memory=false"
        )
    return est


def validation_rows(config: Any, val_dataset: Any) -> int:
    """Sequences one validation samples at once: ``data.val_batch_size`` (default: the whole set) x ``val_kwargs.n``,
    at most ``rollout.micro_batch_size``; 0 when the run never validates."""
    t = config.trainer
    if not t.val_before_train and (t.test_freq is None or t.test_freq <= 0) or val_dataset is None:
        return 0
    rollout = config.actor_rollout_ref.rollout
    rows = int(config.data.val_batch_size or len(val_dataset)) * max(int(rollout.val_kwargs.n), 1)
    return min(rows, int(rollout.micro_batch_size)) if rollout.micro_batch_size else rows
