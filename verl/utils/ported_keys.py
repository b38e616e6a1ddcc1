"""What the keys of public verl that this version accepts for ported scripts do here.

The schemas (``verl/trainer/config/``, ``verl/workers/config/``) hold every leaf key of verl's legacy and composed
``ppo_trainer`` YAML with verl's defaults, and say which change nothing here (most tune engines this version does not
have). This module holds the ones that act:

* `apply_ported_keys` maps verl's older spellings onto the keys that run, the way verl does, each with a warning
  naming the key to use instead: the deprecated global micro-batch sizes (``global // workers``), a null micro-batch
  size (this version's default: memory only), ``optim.warmup_style`` (-> ``lr_scheduler_type``) and ``ray_kwargs``
  (-> ``ray_init``). It is the one step that changes a config: ``load_config("ppo_trainer")`` runs it on the merged
  ``DictConfig`` before building the frozen dataclass (``verl.utils.config_loader.PREPARE``);
* a value this version cannot honour either warns and says what runs instead (`WARN_UNLESS`: the run is the same
  algorithm, e.g. a vLLM engine setting or sequence parallelism) or is an error (`ERROR_UNLESS`: the run would be
  another algorithm, e.g. MoE router replay);
* a key verl derives from another (`MIRRORED_KEYS`, e.g. ``actor.rollout_n`` from ``rollout.n``) follows it; set to
  another value it is an error when the run would differ, else a warning.
"""

from __future__ import annotations

import logging
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl.utils.config import ConfigError, default_config, select

logger = logging.getLogger(__name__)

__all__ = [
    "ERROR_UNLESS",
    "MIRRORED_KEYS",
    "SFT_ERROR_UNLESS",
    "SFT_WARN_UNLESS",
    "WARN_UNLESS",
    "apply_deprecated_micro_batch_sizes",
    "apply_ported_keys",
    "check_ported_keys",
    "check_sft_ported_keys",
    "sft_column_paths",
    "warn_ported_keys",
]

ARR, CRITIC, RM = "actor_rollout_ref", "critic", "reward_model"

# (deprecated verl key counting responses over all workers, the per-worker key it sets, the role's worker-count keys,
# the deprecated key it follows by default: no warning of its own when it holds that key's value)
DEPRECATED_MICRO_BATCH = (
    (f"{ARR}.actor.ppo_micro_batch_size", f"{ARR}.actor.ppo_micro_batch_size_per_gpu", None, None),
    (f"{ARR}.rollout.log_prob_micro_batch_size", f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu", None, None),
    (f"{ARR}.ref.log_prob_micro_batch_size", f"{ARR}.ref.log_prob_micro_batch_size_per_gpu", None, None),
    ("critic.ppo_micro_batch_size", "critic.ppo_micro_batch_size_per_gpu", CRITIC, None),
    (
        "critic.forward_micro_batch_size",
        "critic.forward_micro_batch_size_per_gpu",
        CRITIC,
        "critic.ppo_micro_batch_size",
    ),
    ("reward_model.micro_batch_size", "reward_model.micro_batch_size_per_gpu", RM, None),
)
# (per-worker micro-batch key verl leaves null by default, the key that makes it unused when true)
NULLABLE_MICRO_BATCH = (
    (f"{ARR}.actor.ppo_micro_batch_size_per_gpu", f"{ARR}.actor.use_dynamic_bsz"),
    (f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu", f"{ARR}.rollout.log_prob_use_dynamic_bsz"),
    (f"{ARR}.ref.log_prob_micro_batch_size_per_gpu", f"{ARR}.ref.log_prob_use_dynamic_bsz"),
    ("critic.ppo_micro_batch_size_per_gpu", None),  # the critic always runs fixed-size micro-batches here
    ("reward_model.micro_batch_size_per_gpu", None),
)
# ray_kwargs.ray_init keys this version reads (into ray_init.<same key>)
RAY_INIT_KEYS = ("address", "num_cpus")

_NO_SEQUENCE_PARALLEL = "sequence parallelism is not implemented: each worker holds whole sequences (the same math)"
_NO_PROFILING = "profiling is not wired into the trainer (benchmarks/ has profiling scripts)"
_ADAMW_ONLY = "the optimizer is torch.optim.AdamW in this version (another optimizer would be another algorithm)"
_NO_MOE_REPLAY = "MoE router replay is not implemented: the update's expert routing, so its gradient, would differ"
_NO_CUSTOM_DATASET = (
    "custom dataset classes are not supported; write the data as parquet/JSONL with verl's columns (docs/data.md)"
)
_FSDP_SECTIONS = (f"{ARR}.actor.fsdp_config", f"{ARR}.ref.fsdp_config", "critic.model.fsdp_config")

# key, values this version implements, what runs for any other value (a warning)
WARN_UNLESS: tuple[tuple[str, tuple, str], ...] = (
    (
        f"{ARR}.rollout.name",
        ("hf", "vllm"),
        "sampling runs on the built-in HF KV-cache sampler (same sampling "
        "semantics: temperature, top-k, top-p, n); SGLang is not wired in this version (vLLM is: rollout.name=vllm)",
    ),
    (
        f"{ARR}.actor.strategy",
        ("dp", "fsdp", "fsdp2"),
        "the data-parallel worker runs (FSDP2 with trainer.backend=ray); Megatron is not implemented",
    ),
    ("critic.strategy", ("dp", "fsdp", "fsdp2"), "the data-parallel worker runs (FSDP2 with trainer.backend=ray)"),
    (
        f"{ARR}.hybrid_engine",
        (True,),
        "the rollout samples with the actor's own weights (the hybrid engine is the only layout)",
    ),
    (f"{ARR}.actor.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    ("critic.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    ("reward_model.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL),
    *((f"{s}.ulysses_sequence_parallel_size", (1,), _NO_SEQUENCE_PARALLEL) for s in _FSDP_SECTIONS),
    (f"{ARR}.model.use_liger", (False,), "Liger kernels are GPU-only here: the model's own ops run"),
    (
        f"{ARR}.model.use_fused_kernels",
        (False,),
        "fused GPU log-prob kernels are not used: log-probs and entropy already come from one log-softmax over the "
        "response positions",
    ),
    *(
        (
            f"{m}.enable_activation_offload",
            (False,),
            "activations stay in memory (enable_gradient_checkpointing=true trades compute for memory)",
        )
        for m in (f"{ARR}.model", "critic.model")
    ),
    *(
        (f"{m}.tiled_mlp.enabled", (False,), "the model's own MLP runs (tiled MLP only saves memory)")
        for m in (f"{ARR}.model", "critic.model")
    ),
    (f"{ARR}.model.hf_config_path", (None,), "the model config is read from actor_rollout_ref.model.path"),
    (
        f"{ARR}.model.tokenizer_path",
        (None,),
        "the tokenizer comes from data.tokenizer, else actor_rollout_ref.model.path: set data.tokenizer",
    ),
    (f"{ARR}.model.mtp.enable_rollout", (False,), "the sampler decodes one token per step (no MTP speculation)"),
    (
        f"{ARR}.actor.fsdp_config.fsdp_size",
        (-1,),
        "FSDP2 shards over all the role's workers (hybrid sharding is not implemented)",
    ),
    (
        f"{ARR}.actor.fsdp_config.offload_policy",
        (False,),
        "use actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload for CPU offload",
    ),
    *(
        (
            f"{s}.full_determinism",
            (False,),
            "deterministic CUDA kernels are not forced (CPU runs are bit-for-bit repeatable for a seed)",
        )
        for s in _FSDP_SECTIONS
    ),
    *(
        (f"{r}.checkpoint.async_save", (False,), "checkpoints are written in the step")
        for r in (f"{ARR}.actor", CRITIC)
    ),
    (
        f"{ARR}.actor.calculate_sum_pi_squared",
        (False,),
        "the sum of squared token probabilities is not computed in this version",
    ),
    (f"{ARR}.rollout.trace.backend", (None,), "rollout traces are not written"),
    (f"{ARR}.rollout.prometheus.enable", (False,), "no inference server runs, so none exports metrics"),
    (f"{ARR}.rollout.skip_rollout", (False,), "every step samples its own responses (dumped rollouts are not read)"),
    (f"{ARR}.rollout.quantization", (None,), "the sampler runs the actor's weights in rollout.dtype (not quantized)"),
    (f"{ARR}.nccl_timeout", (600,), "set ray_init.dist_timeout_s: it is the collective timeout of the workers here"),
    ("transfer_queue.enable", (False,), "batches travel between roles as DataProto (the same data)"),
    ("trainer.default_hdfs_dir", (None,), "no HDFS copy is made: checkpoints stay in trainer.default_local_dir"),
    ("trainer.profile_steps", (None,), _NO_PROFILING),
    ("global_profiler.tool", (None,), _NO_PROFILING),
    ("global_profiler.steps", (None,), _NO_PROFILING),
    *((f"{r}.profiler.enable", (False,), _NO_PROFILING) for r in (f"{ARR}.actor", f"{ARR}.ref", CRITIC, RM)),
    ("ray_init.timeline_json_file", (None,), "no Ray timeline is written"),
)

# key, values this version implements, why any other value cannot run (a ConfigError)
ERROR_UNLESS: tuple[tuple[str, tuple, str], ...] = (
    (
        f"{ARR}.rollout.mode",
        ("sync", "async"),
        "the rollout modes are sync and async (the trainer's batch call runs in both; async is verl's server mode, "
        "whose per-request generate an agent loop drives)",
    ),
    (
        f"{ARR}.rollout.over_sample_rate",
        (0,),
        "over-sampling and dropping the slowest responses is not implemented: every sampled response is trained on",
    ),
    (f"{ARR}.rollout.enable_rollout_routing_replay", (False,), _NO_MOE_REPLAY),
    (f"{ARR}.actor.router_replay.mode", ("disabled",), _NO_MOE_REPLAY),
    (f"{ARR}.ref.router_replay.mode", ("disabled",), _NO_MOE_REPLAY),
    (f"{ARR}.model.mtp.enable_train", (False,), "training multi-token-prediction layers is not implemented"),
    (
        f"{ARR}.model.custom_chat_template",
        (None,),
        "a custom chat template is not applied in this version (the prompts would differ); put it in the tokenizer "
        "directory's tokenizer_config.json (chat_template)",
    ),
    *(
        (f"{r}.optim.{key}", (value,), _ADAMW_ONLY)
        for r in (f"{ARR}.actor", CRITIC)
        for key, value in (
            ("optimizer", "AdamW"),
            ("optimizer_impl", "torch.optim"),
            ("override_optimizer_config", None),
        )
    ),
    ("algorithm.use_pf_ppo", (False,), "preference-feedback PPO reweighting is not implemented in this version"),
    ("data.custom_cls.path", (None,), _NO_CUSTOM_DATASET),
    ("data.sampler.class_path", (None,), "custom prompt samplers are not supported: data.shuffle orders the prompts"),
    ("data.datagen.path", (None,), "generating training data during the run is not supported"),
    (
        "data.apply_chat_template_kwargs",
        ({},),
        "chat-template arguments are not passed in this version (the prompts would differ)",
    ),
    (
        "reward_model.reward_loop_module_path",
        (None,),
        "custom reward-loop classes are not loaded in this version; give a reward function (custom_reward_function)",
    ),
)

# key verl derives from another, the source key, True when another value would change the run (an error, else a
# warning), and what runs
MIRRORED_KEYS: tuple[tuple[str, str, bool, str], ...] = (
    *(
        (f"{r}.rollout_n", f"{ARR}.rollout.n", True, "the update groups and counts responses by rollout.n")
        for r in (f"{ARR}.actor", f"{ARR}.ref", CRITIC)
    ),
    (
        f"{ARR}.actor.use_remove_padding",
        f"{ARR}.model.use_remove_padding",
        False,
        "the actor's passes follow actor_rollout_ref.model.use_remove_padding (packed or padded: the same math)",
    ),
)


def _world_size(config: DictConfig, role: str | None) -> int:
    """Worker processes of a role: its own pool when it has one (``<role>.enable_resource_pool``), else the trainer's."""
    if role is not None and OmegaConf.select(config, f"{role}.enable_resource_pool"):
        node = OmegaConf.select(config, role)
        return int(node.nnodes) * int(node.n_gpus_per_node)
    return int(config.trainer.nnodes) * int(config.trainer.n_gpus_per_node)


def _warn(messages: list[str], message: str) -> None:
    logger.warning(message)
    messages.append(message)


def apply_ported_keys(config: DictConfig) -> list[str]:
    """Map verl's older spellings onto the keys that run; returns the warnings logged: the deprecated global
    micro-batch sizes, null micro-batch sizes, ``optim.warmup_style`` and ``ray_kwargs``. ``config``: the merged
    ``DictConfig`` (`verl.utils.config.merge_config`), changed in place: ``load_config("ppo_trainer")`` runs this
    before it builds the dataclass, so a loaded config holds the translated keys."""
    messages = apply_deprecated_micro_batch_sizes(config)
    messages += _fill_null_micro_batch_sizes(config)
    messages += _apply_warmup_style(config)
    messages += _apply_ray_kwargs(config)
    return messages


def apply_deprecated_micro_batch_sizes(config: DictConfig) -> list[str]:
    """Set each per-worker micro-batch key from verl's deprecated global one when that is given (``global // workers``,
    as verl does) and clear the global one (the sections then hold one of the two, as verl's dataclasses require);
    returns the warnings it logged."""
    messages: list[str] = []
    given = {old: OmegaConf.select(config, old) for old, _, _, _ in DEPRECATED_MICRO_BATCH}
    for old, new, role, follows in DEPRECATED_MICRO_BATCH:
        value = given[old]
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
        OmegaConf.update(config, old, None)
        if follows is None or value != given[follows]:
            _warn(
                messages,
                f"{old}={value} is verl's deprecated global micro-batch size: using {new}={per_worker} "
                f"({value} // {world} workers); set {new} instead",
            )
    return messages


def _fill_null_micro_batch_sizes(config: DictConfig) -> list[str]:
    """A per-worker micro-batch size left null (verl's YAML default) takes this version's default: silently when
    token-budget micro-batches make it unused, else with a warning (it changes memory use, not the update)."""
    messages: list[str] = []
    for key, dynamic_key in NULLABLE_MICRO_BATCH:
        if OmegaConf.select(config, key, default=0) is not None:
            continue
        default = OmegaConf.select(default_config("ppo_trainer"), key)
        OmegaConf.update(config, key, default)
        if dynamic_key is None or not OmegaConf.select(config, dynamic_key):
            _warn(messages, f"{key}=null: using {default} responses per worker (a memory setting); set {key}")
    return messages


def _apply_warmup_style(config: DictConfig) -> list[str]:
    """verl's deprecated ``optim.warmup_style`` sets ``optim.lr_scheduler_type`` when given, as in verl."""
    messages: list[str] = []
    for optim in (f"{ARR}.actor.optim", "critic.optim"):
        style = OmegaConf.select(config, f"{optim}.warmup_style", default=None)
        if style is None:
            continue
        OmegaConf.update(config, f"{optim}.lr_scheduler_type", style)
        OmegaConf.update(config, f"{optim}.warmup_style", None)
        _warn(messages, f"{optim}.warmup_style={style} is deprecated in verl: set {optim}.lr_scheduler_type={style}")
    return messages


def _apply_ray_kwargs(config: DictConfig) -> list[str]:
    """verl's ``ray_kwargs`` (its newer home of ``ray_init``): the keys this version reads go to ``ray_init``."""
    messages: list[str] = []
    kwargs = OmegaConf.select(config, "ray_kwargs", default=None)
    if kwargs is None:
        return messages
    for key, value in (kwargs.ray_init or {}).items():
        if value is None:
            continue
        if key in RAY_INIT_KEYS:
            OmegaConf.update(config, f"ray_init.{key}", value)
        else:
            _warn(messages, f"ray_kwargs.ray_init.{key}={value}: not passed to ray.init in this version")
    if kwargs.timeline_json_file is not None:
        OmegaConf.update(config, "ray_init.timeline_json_file", kwargs.timeline_json_file)
    return messages


_ABSENT = object()


def _unsupported(config: Any, table: tuple[tuple[str, tuple, str], ...]) -> list[tuple[str, Any, str]]:
    found = []
    for key, supported, what in table:
        value = select(config, key, default=_ABSENT)
        if value is not _ABSENT and value not in supported:
            found.append((key, value, what))
    return found


def _mirror_mismatches(config: Any, changes_run: bool) -> list[str]:
    out = []
    for key, source, error, what in MIRRORED_KEYS:
        value, expected = select(config, key), select(config, source)
        if error == changes_run and value != expected:
            out.append(
                f"{key}={value} differs from {source}={expected}: {what}. verl derives {key} from {source}: set "
                f"{source} alone (in a config changed after loading, set both)"
            )
    return out


def _clip_grad_mismatches(config: Any) -> list[str]:
    """``optim.clip_grad`` (verl's newer name) set to a value the role's ``grad_clip`` does not hold."""
    out = []
    for role in (f"{ARR}.actor", CRITIC):
        clip, grad_clip = select(config, f"{role}.optim.clip_grad"), select(config, f"{role}.grad_clip")
        if clip is not None and clip != _default(f"{role}.optim.clip_grad") and clip != grad_clip:
            out.append(
                f"{role}.optim.clip_grad={clip}: the gradient norm is clipped at {role}.grad_clip ({grad_clip}) here; "
                f"set {role}.grad_clip={clip}"
            )
    return out


def check_ported_keys(config: Any) -> None:
    """A ported key set to a value this version cannot run (`ERROR_UNLESS`, a derived key that differs from its
    source where that changes the run, ``optim.clip_grad``): one error naming the key and why."""
    for key, value, why in _unsupported(config, ERROR_UNLESS):
        raise ConfigError(f"{key}={value}: {why}")
    for message in _mirror_mismatches(config, changes_run=True) + _clip_grad_mismatches(config):
        raise ConfigError(message)


def warn_ported_keys(config: Any) -> list[str]:
    """One warning per `WARN_UNLESS` key set to a value this version does not implement (one per value and reason:
    ``reward_manager.name`` follows ``reward_model.reward_manager``), per derived key set apart from its source where
    the run stays the same, and one when ``trainer.total_epochs`` was changed but ``trainer.total_training_steps``
    decides the run length; returns them."""
    messages, seen = [], set()
    for key, value, what_runs in _unsupported(config, WARN_UNLESS):
        if (str(value), what_runs) not in seen:
            seen.add((str(value), what_runs))
            messages.append(f"{key}={value}: {what_runs}")
    messages += _mirror_mismatches(config, changes_run=False)
    trainer = config.trainer
    if trainer.total_training_steps and trainer.total_epochs != _default("trainer.total_epochs"):
        messages.append(
            f"trainer.total_epochs={trainer.total_epochs} is not used: trainer.total_training_steps="
            f"{trainer.total_training_steps} sets the run length (as in verl; the quickstart recipe sets 200 steps). "
            "Set trainer.total_training_steps=null to count epochs"
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
    ("data.custom_cls.path", (None,), _NO_CUSTOM_DATASET),
    ("trainer.nnodes", (1,), "SFT runs in one process in this version: use trainer.nnodes=1"),
    (
        "trainer.n_gpus_per_node",
        (1,),
        "SFT runs in one process in this version: use trainer.n_gpus_per_node=1 (torchrun --nproc_per_node=1)",
    ),
)


def check_sft_ported_keys(config: Any) -> list[str]:
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


def sft_column_paths(config: Any) -> tuple[str, str]:
    """The dotted paths of the prompt and the response in a row: ``data.prompt_key`` followed by verl's
    ``data.prompt_dict_keys`` (``extra_info`` + ``[question]`` -> ``extra_info.question``), likewise the response."""
    d = config.data
    paths = []
    for key, nested in ((d.prompt_key, d.prompt_dict_keys), (d.response_key, d.response_dict_keys)):
        paths.append(".".join([key, *(str(k) for k in nested or [])]))
    return paths[0], paths[1]
