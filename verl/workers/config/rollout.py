"""The rollout section (``actor_rollout_ref.rollout``): the sampler and its engine settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig

__all__ = ["MultiTurnConfig", "RolloutConfig", "SamplingConfig"]


@dataclass
class SamplingConfig(BaseConfig):
    """Sampling parameters of one kind of generation call (``rollout.val_kwargs``: validation)."""

    n: int = 1  # responses per validation prompt (mean@n, best@n)
    do_sample: bool = True  # false: greedy
    temperature: float = 1.0  # sampling temperature; 0 = greedy (log-probs then scored at 1)
    top_k: int = -1  # -1: off
    top_p: float = 1.0  # nucleus sampling; 1.0: off


@dataclass
class MultiTurnConfig(BaseConfig):
    """Multi-turn (tool-calling) rollouts."""

    enable: bool = False  # multi-turn / tool-calling rollout: not implemented (true is an error)


@dataclass
class RolloutConfig(BaseConfig):
    """How responses are sampled: the engine, sampling parameters, lengths and the sampler's fast paths."""

    name: str = "hf"  # hf: the built-in KV-cache sampler (other engines warn and run it)
    n: int = 8  # responses per prompt
    temperature: float = 1.0  # sampling temperature; 0 = greedy (log-probs then scored at 1)
    top_k: int = -1  # -1: off
    top_p: float = 1.0  # nucleus sampling; 1.0: off
    do_sample: bool = True  # false: greedy
    prompt_length: int = 64  # (derived; the prompt length comes from the batch)
    response_length: int = 32  # tokens sampled per response at most
    micro_batch_size: int | None = None  # prompts per generation call; null: all at once
    log_prob_micro_batch_size_per_gpu: int = 128  # responses per forward in a log-prob pass
    log_prob_use_dynamic_bsz: bool = False  # token-budget micro-batches in log-prob passes
    log_prob_max_token_len_per_gpu: int = 16384  # tokens per log-prob micro-batch with log_prob_use_dynamic_bsz
    dtype: str = "fp32"  # fp32 | bf16: torch.autocast while sampling (the actor's fp32 weights)
    share_prompt_prefill: bool = True  # prefill each distinct prompt once for its n samples (same results)
    # write each decoded token's keys/values in place, not by re-concatenation (same samples)
    preallocate_kv_cache: bool = True
    fused_decode: bool = True  # decode steps of Llama-family models with fused q/k/v and gate/up matmuls (same math; others: the generic forward)
    ignore_eos: bool = False  # true: keep sampling past EOS up to response_length
    # validation sampling: greedy by default
    val_kwargs: SamplingConfig = field(default_factory=lambda: SamplingConfig(do_sample=False))
    mode: str = "sync"  # no effect: the HF sampler runs in the worker (sync and async alike)
    # deprecated in verl: sets log_prob_micro_batch_size_per_gpu = it // workers
    log_prob_micro_batch_size: int | None = None
    tensor_model_parallel_size: int = 2  # vLLM/SGLang engine setting: no effect with the HF sampler
    gpu_memory_utilization: float = 0.5  # vLLM/SGLang engine setting: no effect
    enforce_eager: bool = True  # vLLM engine setting: no effect
    free_cache_engine: bool = True  # vLLM engine setting: no effect (the KV cache lives only while sampling)
    enable_chunked_prefill: bool = True  # vLLM engine setting: no effect
    max_num_batched_tokens: int = 8192  # vLLM engine setting: no effect (rollout.micro_batch_size bounds a call)
    max_num_seqs: int = 1024  # vLLM engine setting: no effect
    max_model_len: int | None = None  # vLLM engine setting: no effect
    load_format: str = "dummy_dtensor"  # vLLM weight-sync setting: no effect (the sampler uses the actor's weights)
    layered_summon: bool = False  # FSDP weight-gather setting for vLLM: no effect
    disable_log_stats: bool = True  # vLLM engine setting: no effect
    calculate_log_probs: bool = False  # no effect: the sampler always returns rollout_log_probs
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # vLLM/SGLang engine arguments: no effect
    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)  # multi-turn rollouts
