"""The rollout section (``actor_rollout_ref.rollout``): the sampler and its engine settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig
from verl.utils.ppo_config import uses_agent_loop  # verl.workers.config names it too
from verl.utils.profiler.config import ProfilerConfig
from verl.workers.config.model import MtpConfig

__all__ = [
    "AgentLoopConfig",
    "CheckpointEngineConfig",
    "CustomAsyncServerConfig",
    "MultiTurnConfig",
    "PrometheusConfig",
    "RolloutConfig",
    "SamplingConfig",
    "TraceConfig",
    "uses_agent_loop",
]


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
    """Multi-turn (tool-calling) rollouts: the agent loop's ``tool_agent`` (docs/agent_loop.md)."""

    # multi-turn rollouts: runs the agent loop (as rollout.mode=async does); each row's agent_name picks its loop
    enable: bool = False
    max_assistant_turns: int | None = None  # model turns per trajectory at most (null: until the response budget)
    tool_config_path: str | None = None  # verl's tool YAML (tools: [{class_name, config, tool_schema}]); null: no tools
    # a Python file (or pkg://module) whose @function_tool functions are tools too (docs/tools.md)
    function_tool_path: str | None = None
    # seconds a tool call may run; past it the model reads "Error: <tool> timed out after N s"
    tool_timeout_s: float = 30.0
    max_user_turns: int | None = None  # tool and simulated-user turns per trajectory at most (null: no limit)
    max_parallel_calls: int = 1  # tool calls run per model turn; calls beyond it get an error observation
    max_tool_response_length: int = 256  # characters kept of a tool's answer
    tool_response_truncate_side: str = "middle"  # left: keep the start | right: keep the end | middle: both ends
    interaction_config_path: str | None = None  # verl's interaction YAML (simulated users); null: none
    completion_callback: str | None = None  # older verl key: no effect
    use_inference_chat_template: bool = False  # no effect: trajectories keep the model's own token ids
    # strict | ignore_strippable | disable: compare each trajectory's ids with the template's rendering (warns)
    tokenization_sanity_check_mode: str = "strict"
    format: str = "hermes"  # the tool-call format (a ToolParser name; hermes: <tool_call>{json}</tool_call>)
    num_repeat_rollouts: int | None = None  # no effect (use rollout.n)


@dataclass
class CustomAsyncServerConfig(BaseConfig):
    """A custom async inference-server class (agent loop)."""

    path: str | None = None  # no effect: a Python file (no async server runs here)
    name: str | None = None  # no effect: the class in it


@dataclass
class AgentLoopConfig(BaseConfig):
    """verl's agent loop (rollout.mode=async or multi_turn.enable): many trajectories at once over the rollout's
    per-request generate, in the trainer's process (docs/agent_loop.md)."""

    num_workers: int = 8  # no effect: one agent-loop worker runs in the trainer's process
    default_agent_loop: str = "single_turn_agent"  # the loop of rows without an agent_name (or tool_agent, or yours)
    agent_loop_config_path: str | None = None  # verl's YAML list of {name, _target_: module.Class}: custom loops
    # no effect: a custom async server class
    custom_async_server: CustomAsyncServerConfig = field(default_factory=CustomAsyncServerConfig)
    # the model turns of all unfinished trajectories reach the sampler together, a round at a time: same seed, same
    # trajectories; false: each turn as soon as its trajectory asks (verl's; batches then follow the tools' timing)
    lockstep: bool = True


@dataclass
class CheckpointEngineConfig(BaseConfig):
    """How updated weights reach the inference engine. Here the sampler uses the actor's weights in place."""

    backend: str = "naive"  # no effect: no weights are copied
    update_weights_bucket_megabytes: int = 2048  # no effect: no weights are copied
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # no effect: no weights are copied


@dataclass
class TraceConfig(BaseConfig):
    """Rollout tracing (weave, mlflow)."""

    backend: str | None = None  # weave | mlflow: rollout traces are not written (a value warns)
    token2text: bool = False  # no effect: traces only
    max_samples_per_step_per_worker: int | None = None  # no effect: traces only


@dataclass
class PrometheusConfig(BaseConfig):
    """Prometheus metrics of the inference servers."""

    enable: bool = False  # no inference servers run here (true warns)
    port: int = 9090  # no effect: Prometheus only
    file: str = "/tmp/ray/session_latest/metrics/prometheus/prometheus.yml"  # no effect: Prometheus only
    served_model_name: str | None = None  # (derived) no effect: Prometheus only


@dataclass
class RolloutConfig(BaseConfig):
    """How responses are sampled: the engine, sampling parameters, lengths and the sampler's fast paths."""

    name: str = "hf"  # hf: the built-in KV-cache sampler | vllm: a vLLM engine in the actor's worker (pip install vllm)
    n: int = 1  # responses per prompt
    temperature: float = 1.0  # sampling temperature; 0 = greedy (log-probs then scored at 1)
    top_k: int = -1  # -1: off
    top_p: float = 1.0  # nucleus sampling; 1.0: off
    do_sample: bool = True  # false: greedy
    prompt_length: int = 64  # (derived; the prompt length comes from the batch)
    response_length: int = 32  # tokens sampled per response at most
    micro_batch_size: int | None = None  # prompts per generation call; null: all at once
    # responses per forward in a log-prob pass (null: only with log_prob_use_dynamic_bsz or the deprecated
    # log_prob_micro_batch_size)
    log_prob_micro_batch_size_per_gpu: int | None = 128
    log_prob_use_dynamic_bsz: bool = False  # token-budget micro-batches in log-prob passes
    log_prob_max_token_len_per_gpu: int = 16384  # tokens per log-prob micro-batch with log_prob_use_dynamic_bsz
    dtype: str = "fp32"  # fp32 | bf16: torch.autocast while sampling (the actor's fp32 weights)
    share_prompt_prefill: bool = True  # prefill each distinct prompt once for its n samples (same results)
    # write each decoded token's keys/values in place, not by re-concatenation (same samples)
    preallocate_kv_cache: bool = True
    fused_decode: bool = True  # decode steps of Llama-family models with fused q/k/v and gate/up matmuls (same math; others: the generic forward)
    ignore_eos: bool = False  # true: keep sampling past EOS up to response_length
    # validation sampling: greedy by default
    val_kwargs: SamplingConfig = field(default_factory=lambda: SamplingConfig(do_sample=False, temperature=0.0))
    # sync: the batch call | async: verl's agent loop over the rollout's per-request generate (trainer.backend=local;
    # on the Ray backend async samples through the batch call); docs/agent_loop.md
    mode: str = "sync"
    # deprecated in verl: sets log_prob_micro_batch_size_per_gpu = it // workers
    log_prob_micro_batch_size: int | None = None
    # vllm, Ray backend: ranks per engine (divides the workers; 1: an engine per worker); local: 1 (>1 warns); not hf
    tensor_model_parallel_size: int = 2
    gpu_memory_utilization: float = 0.5  # vllm on GPU: share of device memory for weights + KV cache
    enforce_eager: bool = True  # vllm: no CUDA graphs (always eager on the CPU)
    free_cache_engine: bool = True  # vllm on GPU: sleep mode frees the KV cache while training (no-op on CPU)
    enable_chunked_prefill: bool = True  # vllm: split long prefills across engine steps
    max_num_batched_tokens: int = 8192  # vllm: tokens per engine step (at least max_model_len); hf: micro_batch_size
    max_num_seqs: int = 256  # most sequences decoded at once (vllm: running sequences; both: generate requests)
    # most prompt + response tokens (null: vllm prompt_length + response_length; hf generate: max_position_embeddings)
    max_model_len: int | None = None
    load_format: str = "dummy_dtensor"  # vllm: dummy*: random start, the actor's weights given before sampling
    layered_summon: bool = False  # FSDP weight-gather setting for vLLM: no effect
    disable_log_stats: bool = True  # vllm: false records per-request timings (RequestOutput.metrics); no effect with hf
    # the sampler always returns rollout_log_probs; algorithm.rollout_correction's rollout_is / rollout_rs need true
    calculate_log_probs: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # vLLM/SGLang engine arguments: no effect
    multi_turn: MultiTurnConfig = field(default_factory=MultiTurnConfig)  # multi-turn rollouts
    cudagraph_capture_sizes: list[int] | None = None  # vLLM engine setting: no effect
    data_parallel_size: int = 1  # inference-engine data parallelism: no effect
    expert_parallel_size: int = 1  # inference-engine expert parallelism: no effect
    pipeline_model_parallel_size: int = 1  # inference-engine pipeline parallelism: no effect
    enable_prefix_caching: bool = True  # vllm: reuse prompt KV across requests (dropped at each weight update)
    # vLLM's log-prob kind: no effect (rollout_log_probs are log-softmax of the temperature-scaled logits)
    logprobs_mode: str | None = "processed_logprobs"
    scheduling_policy: str | None = "fcfs"  # vLLM request scheduling: no effect
    # sample more requests and drop the slowest: not implemented (> 0 is an error: the batch would differ)
    over_sample_rate: float = 0.0
    multi_stage_wake_up: bool = False  # SGLang memory setting: no effect
    agent: AgentLoopConfig = field(default_factory=AgentLoopConfig)  # verl's agent loop (async rollouts)
    # how weights reach the inference engine: no effect
    checkpoint_engine: CheckpointEngineConfig = field(default_factory=CheckpointEngineConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)  # rollout tracing: not written
    # load rollouts dumped in skip_dump_dir instead of sampling: not implemented (true warns; every step samples)
    skip_rollout: bool = False
    skip_dump_dir: str = "/tmp/rollout_dump"  # no effect (see skip_rollout)
    skip_tokenizer_init: bool = True  # inference-engine setting: no effect
    # MoE routing recorded while sampling, replayed in the update: not implemented (true is an error)
    enable_rollout_routing_replay: bool = False
    # (derived) profiling: not wired (enable follows the actor's; true warns)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)  # inference-server metrics
    # weight quantization of the sampler (e.g. fp8): not implemented (a value warns; the sampler runs in dtype)
    quantization: str | None = None
    quantization_config_file: str | None = None  # no effect (see quantization)
    mtp: MtpConfig = field(default_factory=MtpConfig)  # no effect: verl's copy of actor_rollout_ref.model.mtp
    limit_images: int | None = None  # vLLM multimodal setting: no effect (text-only models)
