"""Per-step metrics with verl's names, computed from the step's batch and stage timings; and verl's validation
statistics over several responses per prompt (`process_validation_metrics`, in ``validation_stats``)."""

from __future__ import annotations

import time
import zlib
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from verl.experimental.agent_loop.metrics import agent_loop_metrics
from verl.protocol import DataProto
from verl.trainer.ppo.validation_stats import bootstrap_metric, calc_maj_val, process_validation_metrics
from verl.utils.metric import reduce_metrics

__all__ = [
    "StepTimer",
    "bootstrap_metric",
    "calc_maj_val",
    "compute_data_metrics",
    "compute_throughout_metrics",
    "compute_throughput_metrics",
    "compute_timing_metrics",
    "marked_timer",
    "process_validation_metrics",
    "reduce_metrics",
    "step_data_metrics",
]


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


def _compute_response_info(batch: DataProto) -> dict[str, torch.Tensor]:
    """The prompt and response sides of ``attention_mask`` (the response side is the last ``responses.shape[-1]``
    columns): ``response_mask`` (bs, R) and the real token counts ``prompt_length``, ``response_length`` (bs,).

    Generated lengths come from the attention mask, not ``response_mask``: a step callback may take tokens out of
    the loss without changing what was generated."""
    max_response_length = batch.batch["responses"].shape[-1]
    attention_mask = batch.batch["attention_mask"]
    response_mask = attention_mask[:, -max_response_length:]
    return {
        "response_mask": response_mask,
        "prompt_length": attention_mask[:, :-max_response_length].sum(-1).float(),
        "response_length": response_mask.sum(-1).float(),
    }


def compute_data_metrics(batch: DataProto, use_critic: bool = True) -> dict[str, float]:
    """``critic/score|rewards|advantages|returns|values/*``, ``response_length/*``, ``prompt_length/*``."""
    b = batch.batch
    response_mask = b["response_mask"].bool()
    max_response_length = b["responses"].shape[-1]
    info = _compute_response_info(batch)
    prompt_length, response_length = info["prompt_length"], info["response_length"]
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
_NOT_PER_TOKEN = frozenset({"step", "testing", "save_checkpoint", "ray_overhead", "reshard", "update_weights"})


def compute_timing_metrics(batch: DataProto, timing_raw: dict[str, float]) -> dict[str, float]:
    """``timing_s/<stage>`` for every stage, and ``timing_per_token_ms/<stage>`` for the batch's stages: ``gen`` per
    generated token (what it produces), the others per prompt + response token (what they process), as in verl."""
    metrics = {f"timing_s/{k}": v for k, v in timing_raw.items()}
    info = _compute_response_info(batch)
    n_response = info["response_length"].sum().item()
    n_tokens = info["prompt_length"].sum().item() + n_response
    for k, v in timing_raw.items():
        per = n_response if k in ("gen", "gen_max") else n_tokens
        if k not in _NOT_PER_TOKEN and per:
            metrics[f"timing_per_token_ms/{k}"] = 1000.0 * v / per
    return metrics


def compute_throughput_metrics(batch: DataProto, timing_raw: dict[str, float], n_gpus: int = 1) -> dict[str, float]:
    """``perf/total_num_tokens`` (prompt + response tokens), ``perf/time_per_step``, ``perf/throughput`` (tokens/s/device).

    The tokens are ``meta_info["global_token_num"]`` (verl's per-row counts) when the batch carries them, else the
    attention mask's sum: the same number."""
    counts = batch.meta_info.get("global_token_num") if isinstance(batch.meta_info, dict) else None
    total = int(sum(counts)) if counts is not None else int(batch.batch["attention_mask"].sum().item())
    step_time = timing_raw.get("step", 0.0)
    return {
        "perf/total_num_tokens": total,
        "perf/time_per_step": step_time,
        "perf/throughput": total / step_time / max(1, n_gpus) if step_time > 0 else 0.0,
    }


# verl's spelling, kept so ported trainers find it
compute_throughout_metrics = compute_throughput_metrics


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
    """Everything a step logs about its batch: data metrics, the agent loop's (``num_turns/*``, ``agent_loop/*``), the
    overlong penalty and the reward function's own numeric fields (``reward/<key>/mean``), stage timings and
    throughput."""
    from verl.trainer.ppo.sample_log import finite_numbers

    metrics = compute_data_metrics(batch, use_critic)
    metrics.update(prompt_digest(batch))
    metrics.update(agent_loop_metrics(batch.non_tensor_batch))  # num_turns/*, agent_loop/* (multi-turn batches)
    if "overlong_penalty" in batch.batch:
        metrics["reward/overlong_penalty_mean"] = batch.batch["overlong_penalty"].mean().item()
    for key in batch.meta_info.get("reward_extra_keys", []):
        values = finite_numbers(batch.non_tensor_batch.get(key, []))
        if values:
            metrics[f"reward/{key}/mean"] = float(np.mean(values))
    metrics.update(compute_timing_metrics(batch, timing_raw))
    metrics.update(compute_throughput_metrics(batch, timing_raw, n_gpus))
    return metrics


def prompt_digest(batch: DataProto) -> dict[str, int]:
    """``training/prompt_digest``: a CRC-32 of the dataset row indices the step trained on, in batch order. Two runs
    that trained on the same batches log the same values; a resumed run that skipped or repeated a batch does not."""
    index = batch.non_tensor_batch.get("index")
    if index is None or any(i is None for i in index):  # prompts given to train_step without a dataset row
        return {}
    return {"training/prompt_digest": zlib.crc32(np.asarray(index, dtype=np.int64).tobytes())}


def step_summary(
    batch: DataProto, timer: StepTimer, backend: Any, trainer_cfg: Any, use_critic: bool
) -> dict[str, float]:
    """A step's data, timing and throughput metrics (and the Ray overhead, when the workers are remote)."""
    metrics: dict[str, float] = {}
    overhead = backend.pop_overhead_s() if backend is not None else None
    if overhead is not None:  # driver time in worker calls not spent computing: Ray, pickling, transfer
        timer.add("ray_overhead", overhead)
        metrics["perf/ray_overhead_fraction"] = overhead / max(timer.seconds["step"], 1e-9)
    n_gpus = trainer_cfg.n_gpus_per_node * trainer_cfg.nnodes
    metrics.update(step_data_metrics(batch, timer.seconds, use_critic, n_gpus))
    return metrics
