"""From a model, a GPU type, a GPU count and a task to a ``main_ppo`` configuration: offload, rollout tensor
parallelism and memory share, gradient checkpointing, micro-batch sizes and token budgets, each chosen with the
memory model of `verl.planner.memory` and a simple throughput model, each with its reason.

Rules, in order (per device; ``M`` = device memory, 90% of it usable):

0. The log-prob passes run chunked (``entropy_from_logits_with_chunking``): the same values to float rounding.
1. FSDP shards the actor (and critic) over all GPUs. The AdamW moments, then the parameters, are offloaded only when
   the sharded training states alone would take over 45% of ``M``. The reference's parameters are offloaded (it runs
   one forward per step; the memory goes to the KV cache).
2. The rollout engine gets what the resident states leave: ``gpu_memory_utilization`` = (0.9 M - resident) / M,
   rounded down to 0.05, within [0.3, 0.9] (the training states stay on the device during sampling).
3. Rollout TP: the one of 1, 2, 4, 8 (dividing the GPU count and the head counts) with the most generated tokens/s
   per GPU in a bandwidth-bound decode model: a step reads the weight shard and the running sequences' KV cache;
   the batch is what the KV cache holds at full length; each doubling of TP costs 10% for its all-reduces.
   A large batch turns the decode compute-bound: a step takes at least 2 x params x batch FLOPs at 50% of peak.
4. The update's token budget is the largest whose update phase fits; gradient checkpointing stays off only when that
   budget holds 16k tokens and 2 full-length sequences without it. The log-prob passes (no gradients) get their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from verl.planner.hardware import Device
from verl.planner.memory import PlanInputs, estimate_memory, kv_cache_bytes, resident_bytes

USABLE = 0.9
DECODE_MFU = 0.5  # a large decode batch turns compute-bound: at most this share of the bf16 peak
MIN_TOKENS_NO_CKPT = 16384  # a micro-batch this large keeps a GPU busy; below it checkpointing buys a larger one
# task -> typical lengths and batch (prompt tokens, response tokens, samples per prompt, prompts per step)
TASKS: dict[str, dict[str, int]] = {
    "code-generation": dict(prompt=1024, response=2048, n=8, batch=256),
    "math": dict(prompt=512, response=1024, n=5, batch=1024),
    "chat": dict(prompt=1024, response=1024, n=4, batch=512),
}
TASKS["gsm8k"] = TASKS["math"]


@dataclass
class Recommendation:
    inputs: PlanInputs
    overrides: dict[str, Any]
    reasons: list[str] = field(default_factory=list)
    throughput: dict[str, float] = field(default_factory=dict)


def _usable(inp: PlanInputs) -> float:
    return USABLE * inp.device_bytes


def _fits_update(inp: PlanInputs, tokens: int) -> bool:
    trial = replace(inp, micro_tokens=tokens)
    return estimate_memory(trial).total("update") <= _usable(inp)


def _fits_log_prob(inp: PlanInputs, tokens: int) -> bool:
    trial = replace(inp, logprob_micro_tokens=tokens)
    return estimate_memory(trial).total("log_prob") <= _usable(inp)


def largest_budget(inp: PlanInputs, fits, step: int = 1024, limit: int = 1 << 20) -> int:
    """The largest multiple of ``step`` tokens (up to ``limit``) for which ``fits(inp, tokens)``; 0 if none."""
    lo, hi = 0, limit // step
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(inp, mid * step):
            lo = mid
        else:
            hi = mid - 1
    return lo * step


def decode_tokens_per_s(inp: PlanInputs, device: Device, tp: int) -> tuple[float, int]:
    """(generated tokens/s per GPU, concurrent sequences per replica) of a bandwidth-bound decode at TP ``tp``."""
    seq = inp.prompt_len + inp.response_len
    trial = replace(inp, rollout_tp=tp)
    per_replica = estimate_memory(trial).kv_cache_tokens or 0
    rows_per_replica = max(1, inp.rollout_rows * tp)  # rollout_rows is per GPU
    batch = min(rows_per_replica, per_replica // seq)
    if batch < 1:
        return 0.0, 0
    weights = inp.shape.num_params * inp.rollout_bytes / tp
    kv_read = kv_cache_bytes(inp.shape, batch * (inp.prompt_len + inp.response_len // 2), inp.rollout_bytes, tp)
    read_s = (weights + kv_read) / (device.bandwidth_tbps * 1e12)
    compute_s = 2 * inp.shape.num_params * batch / (tp * device.bf16_tflops * 1e12 * DECODE_MFU)
    step_s = max(read_s, compute_s)
    penalty = 1 - 0.1 * math.log2(tp)
    return batch / step_s / tp * penalty, batch


def recommend(
    inp: PlanInputs, device: Device, num_gpus: int, mini_batch: int | None = None, n_heads: int | None = None
) -> Recommendation:
    """Fill in ``inp``'s offload, rollout and batch choices for ``num_gpus`` devices of ``device`` (rules above)."""
    reasons: list[str] = []
    mem = inp.device_bytes
    if not inp.chunked_logprobs:  # the same log-probs to float rounding, without (tokens, vocab) float32 tensors
        inp = replace(inp, chunked_logprobs=True)
        reasons.append(
            "log-probs and entropy in chunks (entropy_from_logits_with_chunking): 8 instead of 16 float32 bytes "
            "per vocabulary entry of each response token"
        )
    inp = replace(inp, ref_param_offload=inp.reference and inp.lora_rank == 0)
    if inp.ref_param_offload:
        reasons.append("reference parameters offloaded: one forward per step; the memory goes to the KV cache")
    states = sum(v for k, v in resident_bytes(inp).items() if "actor" in k or "critic" in k)
    if states > 0.45 * mem:
        inp = replace(inp, optimizer_offload=True)
        reasons.append(f"AdamW moments offloaded: the sharded training states take {states / mem:.0%} of a GPU")
        states = sum(v for k, v in resident_bytes(inp).items() if "actor" in k or "critic" in k)
        if states > 0.45 * mem:
            inp = replace(inp, param_offload=True)
            reasons.append(f"parameters offloaded too: still {states / mem:.0%} of a GPU")
    resident = sum(resident_bytes(inp).values())
    util = math.floor(max(0.3, min(0.9, (USABLE * mem - resident) / mem)) * 20) / 20
    inp = replace(inp, gpu_memory_utilization=util)
    reasons.append(
        f"gpu_memory_utilization={util}: what the resident training states ({resident / 2**30:.1f} GiB) leave"
    )

    heads = n_heads or inp.shape.num_heads
    options = [t for t in (1, 2, 4, 8) if num_gpus % t == 0 and heads % t == 0]
    scored = {t: decode_tokens_per_s(inp, device, t) for t in options}
    tp = max(scored, key=lambda t: scored[t][0])
    if scored[tp][0] <= 0:
        raise ValueError(
            f"the model's weights do not fit a rollout replica of up to {max(options)} x {device.name} at "
            f"gpu_memory_utilization={util}: use more or larger GPUs, or LoRA / offload"
        )
    inp = replace(inp, rollout_tp=tp)
    tokens_s, batch = scored[tp]
    table = ", ".join(f"TP{t}: {s / 1e3:.1f}k" for t, (s, _) in scored.items())
    reasons.append(f"rollout TP={tp}: {batch} sequences at a time per replica; decode tokens/s per GPU {table}")

    seq = inp.prompt_len + inp.response_len
    no_ckpt = largest_budget(replace(inp, gradient_checkpointing=False), _fits_update)
    ckpt = no_ckpt < max(2 * seq, MIN_TOKENS_NO_CKPT)
    inp = replace(inp, gradient_checkpointing=ckpt)
    budget = largest_budget(inp, _fits_update) if ckpt else no_ckpt
    if budget < seq:
        raise ValueError(
            f"one sequence of {seq} tokens does not fit the update on a {device.name} even with gradient "
            "checkpointing and offload: use more GPUs (FSDP shards further), LoRA, or shorter sequences"
        )
    reasons.append(
        f"gradient checkpointing {'on' if ckpt else 'off'}: without it the update fits {no_ckpt} tokens per GPU "
        f"({no_ckpt // seq} full-length sequences; off needs {max(2 * seq, MIN_TOKENS_NO_CKPT)})"
    )
    lp_budget = largest_budget(inp, _fits_log_prob)
    micro_rows = max(1, budget // seq)
    lp_rows = max(1, lp_budget // seq)
    inp = replace(inp, micro_tokens=budget, logprob_micro_tokens=lp_budget, micro_rows=micro_rows)
    reasons.append(
        f"update token budget {budget} per GPU ({micro_rows} full-length sequences), log-prob budget {lp_budget}"
    )
    overrides = _overrides(inp, num_gpus, mini_batch, micro_rows, lp_rows)
    rec = Recommendation(inp, overrides, reasons)
    rec.throughput = _throughput(inp, device, num_gpus, tokens_s)
    return rec


def _overrides(inp: PlanInputs, num_gpus: int, mini_batch: int | None, micro: int, lp_micro: int) -> dict:
    prompts = inp.rollout_rows * num_gpus // max(inp.rollout_n, 1)
    fsdp = {"param_offload": inp.param_offload, "optimizer_offload": inp.optimizer_offload}
    log_prob = {
        "log_prob_micro_batch_size_per_gpu": lp_micro,
        "log_prob_use_dynamic_bsz": True,
        "log_prob_max_token_len_per_gpu": inp.logprob_micro_tokens,
    }
    out: dict[str, Any] = {
        "data": {
            "train_batch_size": prompts,
            "max_prompt_length": inp.prompt_len,
            "max_response_length": inp.response_len,
        },
        "actor_rollout_ref": {
            "model": {"enable_gradient_checkpointing": inp.gradient_checkpointing, "use_remove_padding": True},
            "actor": {
                "ppo_mini_batch_size": mini_batch or max(1, prompts // 4),
                "ppo_micro_batch_size_per_gpu": micro,
                "use_dynamic_bsz": True,
                "ppo_max_token_len_per_gpu": inp.micro_tokens,
                "use_kl_loss": inp.reference,
                "entropy_from_logits_with_chunking": inp.chunked_logprobs,
                "fsdp_config": dict(fsdp),
            },
            "rollout": {
                "name": inp.rollout_engine,
                "n": inp.rollout_n,
                "tensor_model_parallel_size": inp.rollout_tp,
                "gpu_memory_utilization": inp.gpu_memory_utilization,
                **log_prob,
            },
            "ref": {
                "fsdp_config": {"param_offload": inp.ref_param_offload},
                "entropy_from_logits_with_chunking": inp.chunked_logprobs,
                **log_prob,
            },
        },
        "trainer": {
            "backend": "ray",
            "device": "cuda",
            "n_gpus_per_node": min(num_gpus, 8),
            "nnodes": -(-num_gpus // 8),
        },
    }
    if inp.lora_rank:
        out["actor_rollout_ref"]["model"].update(lora_rank=inp.lora_rank, lora_alpha=2 * inp.lora_rank)
    if inp.critic:
        out["algorithm"] = {"adv_estimator": "gae"}
        out["critic"] = {
            "ppo_micro_batch_size_per_gpu": micro,
            "use_dynamic_bsz": True,
            "ppo_max_token_len_per_gpu": inp.micro_tokens,
            "model": {"enable_gradient_checkpointing": inp.gradient_checkpointing, "fsdp_config": dict(fsdp)},
        }
    else:
        out["algorithm"] = {"adv_estimator": "grpo"}
    return out


def _throughput(inp: PlanInputs, device: Device, num_gpus: int, decode_tokens_s: float) -> dict[str, float]:
    """Seconds per step at full-length responses: decode at the modelled rate; the forward/backward passes at 40% of
    the GPU's bf16 peak (6 x params FLOPs per token for the update, +2 with checkpointing; 2 per log-prob pass)."""
    rows = inp.rollout_rows * num_gpus
    generated = rows * inp.response_len
    tokens = rows * (inp.prompt_len + inp.response_len)
    passes = 2 + (2 if inp.reference else 0) + (8 if inp.gradient_checkpointing else 6)
    if inp.critic:
        passes += 2 + (8 if inp.gradient_checkpointing else 6)
    flops = passes * inp.shape.num_params * tokens
    train_s = flops / (num_gpus * device.bf16_tflops * 1e12 * 0.4)
    gen_s = generated / (decode_tokens_s * num_gpus) if decode_tokens_s else float("inf")
    return {"generation_s": gen_s, "training_s": train_s, "step_s": gen_s + train_s, "generated_tokens": generated}
