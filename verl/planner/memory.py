"""Per-device memory of an RL step, phase by phase, from first principles: what each tensor class costs.

A step of the main job moves through phases, and a device holds at the peak of each:

    load      building the models: the states built so far plus the copy being read (CPU only: on GPU the weights
              are read on the host and sharded)
    rollout   sampling: resident states + the engine (HF: the KV cache and one step's logits; vLLM/SGLang: their
              reservation, ``gpu_memory_utilization`` x device memory, holding their weights and KV cache)
    log_prob  old/reference log-probs: resident states + one no-grad micro-batch forward
    update    the actor's (or critic's) optimizer step: resident + gradients + saved activations + logits

*Resident* states stay between phases: the actor's parameters and AdamW moments (FSDP shards them over
``world_size`` devices; offload moves them to the host), the reference's parameters, the critic's. Gradients live
only in the update (the actor frees them with ``zero_grad(set_to_none=True)``). Every formula below is per device.

Activations saved for the backward of one Llama/Qwen2 decoder layer, per token, in elements (HF's eager ops with
SDPA attention; h = hidden, kv = kv_heads x head_dim, I = MLP width):

    RMSNorm (x, x*rsqrt, output)            3h      x 2 norms
    q, attention output, its o_proj copy    3h      rotary q/k; k, v: 2kv
    MLP: gate, silu(gate), up, product      4I
    ---------------------------------------------------------------
    per layer per token                     9h + 2kv + 4I     (x bytes of the compute dtype)

With gradient checkpointing a layer keeps only its input (h) and one layer at a time is recomputed in full.
The logits are the other large term: (tokens, V) in the compute dtype from the lm_head, a float32 copy, the float32
log-softmax and, in the backward, a float32 gradient and the lm_head's input gradient of the same size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.planner.shapes import ModelShape

FP32 = 4
ADAM_MOMENTS = 2  # exp_avg and exp_avg_sq, float32, per trainable parameter
# What a run takes besides the tensors counted here: on CPU, measured with the shipped warm start's shape (0.2M
# parameters, `python benchmarks/memory_planner.py --only overhead`: 137 MiB of which 22 MiB are counted tensors);
# on a GPU, the CUDA context and the caching allocator's slack (an allowance, not measured here).
RUNTIME_BYTES = {"cpu": 128 * 2**20, "cuda": 2**30, "rocm": 2**30}


@dataclass
class PlanInputs:
    """What decides a device's memory in one step (all token counts are per device)."""

    shape: ModelShape
    device_bytes: int
    world_size: int = 1  # FSDP shards over this many devices
    platform: str = "cuda"  # cuda | rocm | cpu
    param_bytes: int = FP32  # the trained copy (FSDP keeps float32 parameters; mixed precision computes in bf16)
    compute_bytes: int = 2  # activations and gathered weights: 2 (bf16), 4 (fp32)
    lora_rank: int = 0
    # data
    prompt_len: int = 512
    response_len: int = 1024
    rollout_n: int = 1  # samples per prompt
    rollout_rows: int = 1  # sequences this device samples in one step
    # actor update: rows of a micro-batch, or a token budget (use_dynamic_bsz)
    micro_rows: int = 1
    micro_tokens: int | None = None
    logprob_micro_rows: int = 1
    logprob_micro_tokens: int | None = None
    gradient_checkpointing: bool = False
    shared_prefix: bool = False  # each repeated prompt forwarded once (use_shared_prefix)
    chunked_logprobs: bool = False  # actor.entropy_from_logits_with_chunking
    param_offload: bool = False
    optimizer_offload: bool = False
    # roles
    reference: bool = False
    ref_param_offload: bool = False
    ref_param_bytes: int = 2
    critic: bool = False
    # rollout engine
    rollout_engine: str = "hf"  # hf | vllm | sglang
    rollout_tp: int = 1
    gpu_memory_utilization: float = 0.5
    rollout_bytes: int = 2  # the sampler's weights/KV dtype
    validation_rows: int = 0  # sequences sampled at once in a validation (0: none)


@dataclass
class MemoryEstimate:
    phases: dict[str, dict[str, int]] = field(default_factory=dict)  # phase -> component -> bytes
    kv_cache_tokens: int | None = None  # a vLLM/SGLang replica's KV-cache capacity, in tokens

    def total(self, phase: str) -> int:
        return sum(self.phases[phase].values())

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=self.total)

    @property
    def peak_bytes(self) -> int:
        return self.total(self.peak_phase)


def trainable_params(shape: ModelShape, lora_rank: int) -> int:
    """All parameters, or the adapters' ``r x (in + out)`` per adapted matrix with LoRA."""
    return shape.lora_params(lora_rank) if lora_rank > 0 else shape.num_params


def sharded_bytes(count: int, bytes_each: int, world_size: int, offloaded: bool = False) -> int:
    """``count x bytes_each / world_size`` on the device (FSDP's full shard), 0 when offloaded to the host."""
    return 0 if offloaded else -(-count * bytes_each // world_size)


def adam_state_bytes(trainable: int, world_size: int, offloaded: bool) -> int:
    """AdamW: 2 float32 moments per trainable parameter, sharded: ``2 x 4 x N_train / W``."""
    return sharded_bytes(trainable, ADAM_MOMENTS * FP32, world_size, offloaded)


def gathered_layer_bytes(shape: ModelShape, compute_bytes: int, world_size: int) -> int:
    """FSDP unshards one decoder layer for its compute and prefetches the next: ``2 x layer_params x bytes``;
    nothing on one device, where the parameters are whole already."""
    return 0 if world_size <= 1 else 2 * shape.layer_params * compute_bytes


def layer_activation_elements(shape: ModelShape) -> int:
    """Elements one decoder layer saves for its backward, per token: ``9h + 2kv + 4I`` (module docstring)."""
    return 9 * shape.hidden_size + 2 * shape.kv_dim + 4 * shape.intermediate_size


def training_activation_bytes(shape: ModelShape, tokens: int, compute_bytes: int, checkpointing: bool) -> int:
    """Saved activations of a micro-batch of ``tokens``: ``L x (9h + 2kv + 4I) x T x b``; with checkpointing
    ``L x h x T x b`` (layer inputs) plus one layer recomputed in full."""
    per_layer = layer_activation_elements(shape) * tokens * compute_bytes
    if checkpointing:
        return shape.num_layers * shape.hidden_size * tokens * compute_bytes + per_layer
    return shape.num_layers * per_layer


def forward_working_bytes(shape: ModelShape, tokens: int, compute_bytes: int) -> int:
    """A no-grad forward keeps one layer's tensors at a time: ~``(4h + 3I) x T x b`` (residual, norm, attention
    output, MLP gate/up/product)."""
    return (4 * shape.hidden_size + 3 * shape.intermediate_size) * tokens * compute_bytes


def logits_bytes(
    shape: ModelShape, output_tokens: int, response_tokens: int, compute_bytes: int, chunked: bool = False
) -> int:
    """``T_out x V x b + T_resp x V x 16``: the lm_head's output at the ``T_out`` positions it computes (every
    position of a packed sequence; response positions only in the shared-prompt pass), then at the ``T_resp``
    response positions a float32 flat copy, the float32 log-softmax and two more float32 tensors at the peak (the
    entropy metric's ``p`` and ``p log p`` in the forward; in a training backward, the gradients of the log-softmax
    and of its input). The chunked pass (``entropy_from_logits_with_chunking``) keeps the flat copy and, in the
    backward, its gradient: ``T_resp x V x 8``, plus four float32 tensors of one chunk (2^23 elements)."""
    if chunked:
        chunk = min(response_tokens, max(1, 2**23 // shape.vocab_size))
        return shape.vocab_size * (output_tokens * compute_bytes + response_tokens * 2 * FP32 + chunk * 4 * FP32)
    return shape.vocab_size * (output_tokens * compute_bytes + response_tokens * 4 * FP32)


def kv_cache_bytes(shape: ModelShape, tokens: int, bytes_each: int, tp: int = 1) -> int:
    """Keys and values of ``tokens`` positions in every layer: ``2 x L x kv x T x b / TP``."""
    return -(-2 * shape.num_layers * shape.kv_dim * tokens * bytes_each // tp)


def micro_batch_tokens(inp: PlanInputs, training: bool) -> tuple[int, int]:
    """(tokens forwarded, response tokens) of the largest micro-batch. A token budget bounds the tokens; rows x
    (prompt + response) otherwise. The shared-prompt pass forwards each prompt once for its ``n`` rows (not in a
    training pass with gradient checkpointing, where transformers turns the cache off)."""
    rows = inp.micro_rows if training else inp.logprob_micro_rows
    budget = inp.micro_tokens if training else inp.logprob_micro_tokens
    seq = inp.prompt_len + inp.response_len
    if budget:
        rows = max(1, budget // seq)
    if shares_prompts(inp, training):
        prompts = -(-rows // inp.rollout_n)
        return prompts * inp.prompt_len + rows * inp.response_len, rows * inp.response_len
    return rows * seq, rows * inp.response_len


def shares_prompts(inp: PlanInputs, training: bool) -> bool:
    return inp.shared_prefix and inp.rollout_n > 1 and not (training and inp.gradient_checkpointing)


def logit_positions(inp: PlanInputs, training: bool) -> tuple[int, int]:
    """(positions the lm_head computes, response positions) of the largest micro-batch."""
    tokens, response = micro_batch_tokens(inp, training)
    return (response if shares_prompts(inp, training) else tokens), response


def resident_bytes(inp: PlanInputs) -> dict[str, int]:
    """States kept on the device between phases."""
    s, w = inp.shape, inp.world_size
    trainable = trainable_params(s, inp.lora_rank)
    out = {
        "actor params": sharded_bytes(s.num_params, inp.param_bytes, w, inp.param_offload),
        "actor AdamW moments": adam_state_bytes(trainable, w, inp.optimizer_offload),
    }
    if inp.reference and inp.lora_rank == 0:  # with LoRA the reference is the actor with adapters off
        out["reference params"] = sharded_bytes(s.num_params, inp.ref_param_bytes, w, inp.ref_param_offload)
    if inp.critic:
        out["critic params"] = sharded_bytes(s.num_params, inp.param_bytes, w, inp.param_offload)
        out["critic AdamW moments"] = adam_state_bytes(trainable, w, inp.optimizer_offload)
    return out


def rollout_bytes(inp: PlanInputs, rows: int) -> dict[str, int]:
    """The sampler's own memory while ``rows`` sequences decode. vLLM/SGLang reserve a fixed fraction of the device;
    the HF sampler preallocates the KV cache of every row's full length, one decode step's logits and the
    prefill's hidden states."""
    s = inp.shape
    if inp.rollout_engine in ("vllm", "sglang"):
        return {f"{inp.rollout_engine} reservation": int(inp.gpu_memory_utilization * inp.device_bytes)}
    b = inp.rollout_bytes
    seq = inp.prompt_len + inp.response_len
    return {
        "KV cache": kv_cache_bytes(s, rows * seq, b),
        "decode logits": rows * s.vocab_size * (b + 2 * FP32),
        "prefill activations": forward_working_bytes(s, rows * inp.prompt_len, b),
    }


def engine_kv_tokens(inp: PlanInputs) -> int:
    """KV-cache capacity of one vLLM/SGLang replica (``rollout_tp`` devices), in tokens: its reservation less its
    weight shard and ~1 GiB of activation workspace per device, divided by the per-token KV bytes."""
    per_device = inp.gpu_memory_utilization * inp.device_bytes
    weights = inp.shape.num_params * inp.rollout_bytes / inp.rollout_tp
    free = per_device - weights - 2**30
    per_token = kv_cache_bytes(inp.shape, 1, inp.rollout_bytes, inp.rollout_tp)
    return max(0, int(free // per_token))


def estimate_memory(inp: PlanInputs) -> MemoryEstimate:
    """Per-device bytes of each phase of a step (module docstring); the peak is the largest phase."""
    s = inp.shape
    est = MemoryEstimate()
    resident = {**resident_bytes(inp), "runtime": RUNTIME_BYTES.get(inp.platform, 2**30)}
    cpu = inp.platform == "cpu"
    if cpu:  # models are read into process memory: the states so far plus the copy being read
        largest = s.num_params * inp.param_bytes
        est.phases["load"] = {**resident, "weights being read": largest}
        est.phases["load"].pop("actor AdamW moments", None)  # the optimizer's moments appear at its first step
        est.phases["load"].pop("critic AdamW moments", None)
    est.phases["rollout"] = {**resident, **rollout_bytes(inp, inp.rollout_rows)}
    if inp.validation_rows and inp.rollout_engine == "hf":
        est.phases["validation"] = {**resident, **rollout_bytes(inp, inp.validation_rows)}
    tokens, _ = micro_batch_tokens(inp, training=False)
    gathered = gathered_layer_bytes(s, inp.compute_bytes, inp.world_size)
    est.phases["log_prob"] = {
        **resident,
        "gathered layers": gathered,
        "forward working set": forward_working_bytes(s, tokens, inp.compute_bytes),
        "logits": logits_bytes(s, *logit_positions(inp, training=False), inp.compute_bytes, inp.chunked_logprobs),
    }
    tokens, _ = micro_batch_tokens(inp, training=True)
    update = {
        **resident,
        "gradients": sharded_bytes(trainable_params(s, inp.lora_rank), FP32, inp.world_size),
        "gathered layers": gathered,
        "saved activations": training_activation_bytes(s, tokens, inp.compute_bytes, inp.gradient_checkpointing),
        "logits": logits_bytes(s, *logit_positions(inp, training=True), inp.compute_bytes, inp.chunked_logprobs),
    }
    est.phases["update"] = update
    if inp.rollout_engine in ("vllm", "sglang"):
        est.kv_cache_tokens = engine_kv_tokens(inp)
    return est


def format_estimate(est: MemoryEstimate, unit: int = 2**30, unit_name: str = "GiB") -> str:
    """A table: one column per phase, one row per component, the peak marked."""
    names = list(est.phases)
    components: list[str] = []
    for phase in names:
        components += [c for c in est.phases[phase] if c not in components]
    width = max(len(c) for c in components) + 2
    lines = [f"{'per device (' + unit_name + ')':<{width}}" + "".join(f"{n:>11}" for n in names)]
    for c in components:
        cells = "".join(f"{est.phases[n][c] / unit:>11.2f}" if c in est.phases[n] else f"{'':>11}" for n in names)
        lines.append(f"{c:<{width}}{cells}")
    lines.append(f"{'total':<{width}}" + "".join(f"{est.total(n) / unit:>11.2f}" for n in names))
    lines.append(f"peak: {est.peak_bytes / unit:.2f} {unit_name} in {est.peak_phase}")
    return "\n".join(lines)
