"""What the keys of public verl that this version accepts for ported scripts do here.

The schemas (``verl/trainer/config/``, ``verl/workers/config/``) hold them with their verl defaults and say which
change nothing here (most tune engines this version does not have). This module holds the ones that act:

* verl's deprecated global micro-batch sizes (``actor_rollout_ref.actor.ppo_micro_batch_size`` and kin) set the
  per-worker key the way verl does, ``global // workers``, with a warning naming the key to use instead;
* a value this version cannot honour either warns and says what runs instead (`WARN_UNLESS`: the run is the same
  algorithm, e.g. a vLLM engine setting or sequence parallelism) or is an error (`ERROR_UNLESS`: the run would be
  another algorithm, e.g. LoRA or multi-turn rollouts).
"""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl.utils.config import ConfigError, default_config

logger = logging.getLogger(__name__)

__all__ = [
    "ERROR_UNLESS",
    "SFT_ERROR_UNLESS",
    "SFT_WARN_UNLESS",
    "WARN_UNLESS",
    "apply_deprecated_micro_batch_sizes",
    "check_ported_keys",
    "check_sft_ported_keys",
    "sft_column_paths",
    "warn_ported_keys",
]

# (deprecated verl key counting responses over all workers, the per-worker key it sets, the role's worker-count keys)
DEPRECATED_MICRO_BATCH = (
    ("actor_rollout_ref.actor.ppo_micro_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", None),
    (
        "actor_rollout_ref.rollout.log_prob_micro_batch_size",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        None,
    ),
    (
        "actor_rollout_ref.ref.log_prob_micro_batch_size",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        None,
    ),
    ("critic.ppo_micro_batch_size", "critic.ppo_micro_batch_size_per_gpu", "critic"),
    ("reward_model.micro_batch_size", "reward_model.micro_batch_size_per_gpu", "reward_model"),
)

_NO_SEQUENCE_PARALLEL = "sequence parallelism is not implemented: each worker holds whole sequences (the same math)"

# key, values this version implements, what runs for any other value (a warning)
WARN_UNLESS: tuple[tuple[str, tuple, str], ...] = (
    (
        "actor_rollout_ref.rollout.name",
        ("hf",),
        "sampling runs on the built-in HF KV-cache sampler (same sampling "
        "semantics: temperature, top-k, top-p, n); vLLM and SGLang engines are not wired in this version",
    ),
    (
        "actor_rollout_ref.actor.strategy",
        ("dp", "fsdp", "fsdp2"),
        "the data-parallel worker runs (FSDP2 with trainer.backend=ray); Megatron is not implemented",
    ),
    ("critic.strategy", ("dp", "fsdp", "fsdp2"), "the data-parallel worker runs (FSDP2 with trainer.backend=ray)"),
    (
        "reward_model.reward_manager",
        ("naive",),
        "the naive reward manager runs; DAPO's overlong penalty is reward_model.overlong_buffer.enable=true",
    ),
    (
        "actor_rollout_ref.hybrid_engine",
        (True,),
        "the rollout samples with the actor's own weights (the hybrid engine is the only layout)",
    ),
    ("actor_rollout_ref.actor.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    ("critic.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    ("reward_model.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    ("actor_rollout_ref.model.use_liger", (False,), "Liger kernels are GPU-only here: the model's own ops run"),
    (
        "actor_rollout_ref.model.use_fused_kernels",
        (False,),
        "fused GPU log-prob kernels are not used: log-probs and entropy already come from one log-softmax over the "
        "response positions",
    ),
    (
        "actor_rollout_ref.model.enable_activation_offload",
        (False,),
        "activations stay in memory (enable_gradient_checkpointing=true trades compute for memory)",
    ),
    (
        "actor_rollout_ref.actor.fsdp_config.fsdp_size",
        (-1,),
        "FSDP2 shards over all the role's workers (hybrid sharding is not implemented)",
    ),
    (
        "actor_rollout_ref.actor.fsdp_config.offload_policy",
        (False,),
        "use actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload for CPU offload",
    ),
    ("trainer.default_hdfs_dir", (None,), "no HDFS copy is made: checkpoints stay in trainer.default_local_dir"),
    ("trainer.profile_steps", (None,), "profiling is not wired into the trainer (benchmarks/ has profiling scripts)"),
    ("ray_init.timeline_json_file", (None,), "no Ray timeline is written"),
)

# key, values this version implements, why any other value cannot run (a ConfigError)
ERROR_UNLESS: tuple[tuple[str, tuple, str], ...] = (
    (
        "actor_rollout_ref.model.lora_rank",
        (0,),
        "LoRA is not implemented in this version; remove the key to train every weight",
    ),
    (
        "actor_rollout_ref.rollout.multi_turn.enable",
        (False,),
        "multi-turn (tool-calling) rollouts are not implemented in this version; single-turn rollouts only",
    ),
    ("algorithm.use_pf_ppo", (False,), "preference-feedback PPO reweighting is not implemented in this version"),
    (
        "data.custom_cls.path",
        (None,),
        "custom dataset classes are not supported; write the data as parquet/JSONL with verl's columns (docs/data.md)",
    ),
)


def _world_size(config: DictConfig, role: str | None) -> int:
    """Worker processes of a role: its own pool when it has one (``<role>.enable_resource_pool``), else the trainer's."""
    if role is not None and OmegaConf.select(config, f"{role}.enable_resource_pool"):
        node = OmegaConf.select(config, role)
        return int(node.nnodes) * int(node.n_gpus_per_node)
    return int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node)


def apply_deprecated_micro_batch_sizes(config: DictConfig) -> list[str]:
    """Set each per-worker micro-batch key from verl's deprecated global one when that is given (``global // workers``,
    as verl does); returns the warnings it logged."""
    messages = []
    for old, new, role in DEPRECATED_MICRO_BATCH:
        value = OmegaConf.select(config, old)
        if value is None:
            continue
        world = _world_size(config, role)
        if value < world:
            raise ConfigError(
                f"{old}={value} (verl's deprecated global micro-batch size) is split over {world} workers, giving "
                f"none each: set {new} (responses per worker) instead"
            )
        per_worker = value // world
        OmegaConf.update(config, new, per_worker)
        message = (
            f"{old}={value} is verl's deprecated global micro-batch size: using {new}={per_worker} "
            f"({value} // {world} workers); set {new} instead"
        )
        logger.warning(message)
        messages.append(message)
    return messages


_ABSENT = object()


def _unsupported(config: DictConfig, table: tuple[tuple[str, tuple, str], ...]) -> list[tuple[str, Any, str]]:
    found = []
    for key, supported, what in table:
        value = OmegaConf.select(config, key, default=_ABSENT)
        if value is not _ABSENT and value not in supported:
            found.append((key, value, what))
    return found


def check_ported_keys(config: DictConfig) -> None:
    """A `ERROR_UNLESS` key set to a value this version cannot run: one error naming the key and why."""
    for key, value, why in _unsupported(config, ERROR_UNLESS):
        raise ConfigError(f"{key}={value}: {why}")


def warn_ported_keys(config: DictConfig) -> list[str]:
    """One warning per `WARN_UNLESS` key set to a value this version does not implement, and one when
    ``trainer.total_epochs`` was changed but ``trainer.total_training_steps`` decides the run length; returns them."""
    messages = [f"{key}={value}: {what_runs}" for key, value, what_runs in _unsupported(config, WARN_UNLESS)]
    trainer = config.trainer
    if trainer.total_training_steps and trainer.total_epochs != _default("trainer.total_epochs"):
        messages.append(
            f"trainer.total_epochs={trainer.total_epochs} is not used: trainer.total_training_steps="
            f"{trainer.total_training_steps} sets the run length (this version's default is 100 steps; verl's is "
            "null). Set trainer.total_training_steps=null to count epochs"
        )
    for message in messages:
        logger.warning(message)
    return messages


def _default(key: str) -> Any:
    return OmegaConf.select(default_config("ppo_trainer"), key)


# ----------------------------------------------------------------------------------------------------- SFT (main_sft)
SFT_WARN_UNLESS: tuple[tuple[str, tuple, str], ...] = (
    ("ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    ("model.use_liger", (False,), "Liger kernels are GPU-only here: the model's own ops run"),
    ("trainer.device", ("cpu",), "SFT trains on the CPU in this version"),
    ("data.chat_template", (None,), "the tokenizer's own chat template renders the prompts"),
    ("trainer.max_ckpt_to_keep", (None,), "every saved SFT checkpoint is kept"),
)
SFT_ERROR_UNLESS: tuple[tuple[str, tuple, str], ...] = (
    (
        "model.lora_rank",
        (0,),
        "LoRA is not implemented in this version; remove the key to fine-tune every weight",
    ),
    (
        "data.multiturn.enable",
        (False,),
        "multi-turn SFT is not implemented in this version; give one prompt and one response per row",
    ),
    ("data.custom_cls.path", (None,), ERROR_UNLESS[-1][2]),
    ("trainer.nnodes", (1,), "SFT runs in one process in this version: use trainer.nnodes=1"),
    (
        "trainer.n_gpus_per_node",
        (1,),
        "SFT runs in one process in this version: use trainer.n_gpus_per_node=1 (torchrun --nproc_per_node=1)",
    ),
)


def check_sft_ported_keys(config: DictConfig) -> list[str]:
    """The SFT job's `SFT_ERROR_UNLESS` errors (and several processes started by torchrun, each of which would run the
    whole job); returns the `SFT_WARN_UNLESS` warnings it logged."""
    import os

    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world > 1:
        raise ConfigError(
            f"WORLD_SIZE={world}: SFT runs in one process in this version, and each of {world} processes would run the "
            "whole job into the same directory; start it with torchrun --nproc_per_node=1 or plain python"
        )
    for key, value, why in _unsupported(config, SFT_ERROR_UNLESS):
        raise ConfigError(f"{key}={value}: {why}")
    messages = [f"{key}={value}: {what}" for key, value, what in _unsupported(config, SFT_WARN_UNLESS)]
    for message in messages:
        logger.warning(message)
    return messages


def sft_column_paths(config: DictConfig) -> tuple[str, str]:
    """The dotted paths of the prompt and the response in a row: ``data.prompt_key`` followed by verl's
    ``data.prompt_dict_keys`` (``extra_info`` + ``[question]`` -> ``extra_info.question``), likewise the response."""
    d = config.data
    paths = []
    for key, nested in ((d.prompt_key, d.prompt_dict_keys), (d.response_key, d.response_dict_keys)):
        paths.append(".".join([key, *(str(k) for k in nested or [])]))
    return paths[0], paths[1]
