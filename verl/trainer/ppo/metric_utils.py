"""Per-step metrics with verl's names, computed from the step's batch and stage timings."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto


@contextmanager
def marked_timer(name: str, timing_raw: dict[str, float]):
    """Add the block's wall time to ``timing_raw[name]`` (seconds)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        timing_raw[name] = timing_raw.get(name, 0.0) + time.perf_counter() - start


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    if values.numel() == 0:
        return {}
    v = values.float()
    return {f"{prefix}/mean": v.mean().item(), f"{prefix}/max": v.max().item(), f"{prefix}/min": v.min().item()}


def compute_data_metrics(batch: DataProto, use_critic: bool) -> dict[str, float]:
    """``critic/score|rewards|advantages|returns|values/*``, ``response_length/*``, ``prompt_length/*``."""
    b = batch.batch
    response_mask = b["response_mask"].bool()
    max_response_length = b["responses"].shape[-1]
    prompt_length = b["attention_mask"][:, :-max_response_length].sum(-1).float()
    # Generated lengths come from the attention mask: a step callback may take tokens out of the loss (response_mask)
    # without changing what was generated.
    response_length = b["attention_mask"][:, -max_response_length:].sum(-1).float()
    metrics: dict[str, float] = {}
    metrics.update(_stats("critic/score", b["token_level_scores"].sum(-1)))
    metrics.update(_stats("critic/rewards", b["token_level_rewards"].sum(-1)))
    metrics.update(_stats("critic/advantages", b["advantages"][response_mask]))
    metrics.update(_stats("critic/returns", b["returns"][response_mask]))
    if use_critic:
        metrics.update(_stats("critic/values", b["values"][response_mask]))
        var_ret = b["returns"][response_mask].var()
        metrics["critic/vf_explained_var"] = (
            1.0 - (b["returns"] - b["values"])[response_mask].var() / (var_ret + 1e-5)
        ).item()
    metrics.update(_stats("response_length", response_length))
    metrics["response_length/clip_ratio"] = (response_length >= max_response_length).float().mean().item()
    metrics.update(_stats("prompt_length", prompt_length))
    return metrics


# stages not proportional to the batch's tokens: no per-token figure
_NOT_PER_TOKEN = frozenset({"step", "testing", "save_checkpoint", "ray_overhead", "reshard"})


def compute_timing_metrics(batch: DataProto, timing_raw: dict[str, float]) -> dict[str, float]:
    """``timing_s/<stage>`` for every stage, and ``timing_per_token_ms/<stage>`` for the batch's stages: ``gen`` per
    response token (what it produces), the others per prompt + response token (what they process), as in verl."""
    metrics = {f"timing_s/{k}": v for k, v in timing_raw.items()}
    n_tokens = batch.batch["attention_mask"].sum().item()
    mask = batch.batch.get("response_mask")
    n_response = mask.sum().item() if mask is not None else n_tokens
    for k, v in timing_raw.items():
        per = n_response if k in ("gen", "gen_max") else n_tokens
        if k not in _NOT_PER_TOKEN and per:
            metrics[f"timing_per_token_ms/{k}"] = 1000.0 * v / per
    return metrics


def compute_throughput_metrics(batch: DataProto, timing_raw: dict[str, float], n_gpus: int = 1) -> dict[str, float]:
    """``perf/total_num_tokens`` (prompt + response tokens), ``perf/time_per_step``, ``perf/throughput`` (tokens/s/device)."""
    total = int(batch.batch["attention_mask"].sum().item())
    step_time = timing_raw.get("step", 0.0)
    return {
        "perf/total_num_tokens": total,
        "perf/time_per_step": step_time,
        "perf/throughput": total / step_time / max(1, n_gpus) if step_time > 0 else 0.0,
    }


def reduce_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Lists (one value per micro-batch) become their mean."""
    return {k: float(np.mean(v)) if isinstance(v, (list, tuple)) else v for k, v in metrics.items()}


class StepTimer:
    """Wall seconds of one step's stages (``timing_s/<stage>``): ``with timer("gen"): ...``; a stage timed twice (a
    DAPO refill) adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, name: str):
        return marked_timer(name, self.seconds)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds


def step_data_metrics(
    batch: DataProto, timing_raw: dict[str, float], use_critic: bool, n_gpus: int
) -> dict[str, float]:
    """Everything a step logs about its batch: data metrics, the overlong penalty and the reward function's own
    numeric fields (``reward/<key>/mean``), stage timings and throughput."""
    from verl.trainer.ppo.sample_log import finite_numbers

    metrics = compute_data_metrics(batch, use_critic)
    if "overlong_penalty" in batch.batch:
        metrics["reward/overlong_penalty_mean"] = batch.batch["overlong_penalty"].mean().item()
    for key in batch.meta_info.get("reward_extra_keys", []):
        values = finite_numbers(batch.non_tensor_batch.get(key, []))
        if values:
            metrics[f"reward/{key}/mean"] = float(np.mean(values))
    metrics.update(compute_timing_metrics(batch, timing_raw))
    metrics.update(compute_throughput_metrics(batch, timing_raw, n_gpus))
    return metrics
