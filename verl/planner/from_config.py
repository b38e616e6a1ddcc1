"""A main-job config as the planner's inputs: the shapes, batch sizes, dtypes and offloads a run will really use.

``plan_inputs_from_config(config, device)`` reads the same keys the workers read (``actor_rollout_ref.*``,
``critic.*``, ``data.*``, ``trainer.*``), so ``trainer.check_memory`` judges the run that is about to start.
"""

from __future__ import annotations

from typing import Any

from verl.planner.hardware import Device
from verl.planner.memory import FP32, PlanInputs
from verl.planner.shapes import ModelShape, shape_from_model_path
from verl.utils.config import select

_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2}


def dtype_bytes(name: Any, default: int) -> int:
    return _BYTES.get(str(name).lower(), default) if name else default


def _get(node: Any, dotted: str, default: Any = None) -> Any:
    """``node``'s value at ``dotted`` (a loaded config's node), or ``default`` when it is missing or null."""
    value = select(node, dotted, default=None)
    return default if value is None else value


def plan_inputs_from_config(
    config: Any, device: Device, shape: ModelShape | None = None, validation_rows: int | None = None
) -> PlanInputs:
    """The planner's inputs for ``config`` (a loaded ``ppo_trainer`` config) on ``device``. ``validation_rows``: the
    sequences one validation samples at once (default: ``data.val_batch_size`` x ``val_kwargs.n`` when set)."""
    from verl.utils.ppo_config import uses_critic, uses_reference_policy

    arr = config.actor_rollout_ref
    actor, rollout, model = arr.actor, arr.rollout, arr.model
    shape = shape or shape_from_model_path(model.path)
    cpu = device.platform == "cpu"
    distributed = _get(config, "trainer.backend", "local") == "ray"
    world = int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node) if distributed else 1
    n = int(rollout.n)
    prompts_per_device = -(-int(config.data.train_batch_size) // world)
    rollout_rows = prompts_per_device * n
    if rollout.micro_batch_size:
        rollout_rows = min(rollout_rows, int(rollout.micro_batch_size))
    model_bytes = dtype_bytes(_get(model, "dtype"), FP32)
    if cpu:  # the CPU trains and samples in the model's dtype (autocast_dtype, when set, computes in another)
        compute = dtype_bytes(_get(actor, "autocast_dtype"), model_bytes)
        param_bytes, rollout_bytes = model_bytes, dtype_bytes(_get(rollout, "dtype"), model_bytes)
        ref_bytes = model_bytes
    else:  # FSDP: float32 shards, bf16 compute (mixed precision); the reference and the engine in bf16
        compute, param_bytes, rollout_bytes, ref_bytes = 2, FP32, 2, 2
    val_rows = validation_rows
    if val_rows is None and config.data.val_batch_size:
        val_rows = int(config.data.val_batch_size) * int(_get(rollout, "val_kwargs.n", 1))
    if val_rows and rollout.micro_batch_size:
        val_rows = min(val_rows, int(rollout.micro_batch_size))
    # a micro-batch never holds more rows than its mini-batch (update) or the step's batch (log-probs)
    mini_rows = -(-int(actor.ppo_mini_batch_size) * n // world)
    micro = min(int(actor.ppo_micro_batch_size_per_gpu or 1), mini_rows)
    lp_micro = _get(rollout, "log_prob_micro_batch_size_per_gpu") or actor.ppo_micro_batch_size_per_gpu or 1
    lp_micro = min(int(lp_micro), prompts_per_device * n)
    return PlanInputs(
        shape=shape,
        device_bytes=device.memory_bytes,
        world_size=world,
        platform=device.platform,
        param_bytes=param_bytes,
        compute_bytes=compute,
        lora_rank=int(_get(model, "lora_rank", 0) or 0),
        prompt_len=int(config.data.max_prompt_length),
        response_len=int(config.data.max_response_length),
        rollout_n=n,
        rollout_rows=rollout_rows,
        micro_rows=micro,
        micro_tokens=int(actor.ppo_max_token_len_per_gpu) if actor.use_dynamic_bsz else None,
        logprob_micro_rows=lp_micro,
        logprob_micro_tokens=(
            int(rollout.log_prob_max_token_len_per_gpu) if _get(rollout, "log_prob_use_dynamic_bsz") else None
        ),
        gradient_checkpointing=bool(model.enable_gradient_checkpointing),
        shared_prefix=bool(_get(model, "use_shared_prefix", False)),
        chunked_logprobs=bool(_get(actor, "entropy_from_logits_with_chunking", False)),
        param_offload=bool(_get(actor, "fsdp_config.param_offload", False)) and not cpu,
        optimizer_offload=bool(_get(actor, "fsdp_config.optimizer_offload", False)) and not cpu,
        reference=uses_reference_policy(config),
        ref_param_offload=bool(_get(arr, "ref.fsdp_config.param_offload", False)) and not cpu,
        ref_param_bytes=ref_bytes,
        critic=uses_critic(config),
        rollout_engine=str(rollout.name),
        rollout_tp=int(_get(rollout, "tensor_model_parallel_size", 1) or 1),
        gpu_memory_utilization=float(_get(rollout, "gpu_memory_utilization", 0.5)),
        rollout_bytes=rollout_bytes,
        validation_rows=int(val_rows or 0),
    )
