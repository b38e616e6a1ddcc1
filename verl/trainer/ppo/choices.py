"""Fail fast: every choice a registry resolves, checked when the job is built, before a model or a prompt is read.

A typo in ``algorithm.adv_estimator`` or ``trainer.logger`` used to surface only where the choice is first used
(the first advantage computation, the logger's start), after the models had loaded. `check_registered_choices` looks
each one up in its registry when the config loads and raises one `ConfigError` naming every bad key, its value and
the registered names. `check_data_sources` does the same for the datasets' ``data_source`` values against the rule
scorers, when no custom reward function, reward model or custom manager scores them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from verl.utils.config import ConfigError

__all__ = ["KNOWN_ENGINE_NAMES", "check_data_sources", "check_registered_choices"]

# verl's engine names that run the HF sampler here (verl.utils.ported_keys warns, naming what runs)
KNOWN_ENGINE_NAMES = ("hf", "vllm", "sglang", "trtllm", "naive")
KL_CONTROLLERS = ("fixed", "adaptive")


def _bad(key: str, value: Any, names: Iterable[str]) -> str:
    return f"{key}={value!r} is not one of the registered names: {', '.join(sorted(map(str, names)))}"


def check_registered_choices(config: Any) -> None:
    """Raise one ConfigError listing every registry-backed choice of ``config`` that names nothing registered:
    advantage estimator, policy loss, KL estimators, loss aggregation, KL controller, loggers, rollout engine and
    the agent loop. Call it after user code has registered its own (``external_lib`` imported). The reward manager
    is looked up when the reward functions are built, right after: ``custom_reward_function.path`` may register it."""
    from verl.core_algos import ADV_ESTIMATOR_REGISTRY, LOSS_AGG_MODES, POLICY_LOSS_REGISTRY
    from verl.core_algos.kl import KL_PENALTY_TYPES
    from verl.utils.tracking import Tracking
    from verl.workers.rollout.base import registered_rollouts

    alg, actor, rollout = config.algorithm, config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    errors = []
    estimator = getattr(alg.adv_estimator, "value", alg.adv_estimator)
    if str(estimator) not in ADV_ESTIMATOR_REGISTRY:
        errors.append(_bad("algorithm.adv_estimator", estimator, ADV_ESTIMATOR_REGISTRY))
    if actor.policy_loss.loss_mode not in POLICY_LOSS_REGISTRY:
        errors.append(
            _bad("actor_rollout_ref.actor.policy_loss.loss_mode", actor.policy_loss.loss_mode, POLICY_LOSS_REGISTRY)
        )
    for key, value in (
        ("algorithm.kl_penalty", alg.kl_penalty),
        ("actor_rollout_ref.actor.kl_loss_type", actor.kl_loss_type),
    ):
        if str(value).rstrip("+") not in KL_PENALTY_TYPES:  # "+": verl's straight-through variant of each
            errors.append(_bad(key, value, KL_PENALTY_TYPES) + " (each also with a '+' suffix)")
    if actor.loss_agg_mode not in LOSS_AGG_MODES:
        errors.append(_bad("actor_rollout_ref.actor.loss_agg_mode", actor.loss_agg_mode, LOSS_AGG_MODES))
    if alg.kl_ctrl.type not in KL_CONTROLLERS:
        errors.append(_bad("algorithm.kl_ctrl.type", alg.kl_ctrl.type, KL_CONTROLLERS))
    loggers = config.trainer.logger
    for name in [loggers] if isinstance(loggers, str) else list(loggers):
        if name not in Tracking.SUPPORTED:
            errors.append(_bad("trainer.logger", name, Tracking.SUPPORTED))
    engines = {name for name, _ in registered_rollouts()} | set(KNOWN_ENGINE_NAMES)
    if rollout.name not in engines:
        errors.append(_bad("actor_rollout_ref.rollout.name", rollout.name, engines))
    errors += _agent_loop_errors(config)
    if errors:
        raise ConfigError("the config names choices nothing is registered for:\n  " + "\n  ".join(errors))


def _agent_loop_errors(config: Any) -> list[str]:
    from verl.utils.ppo_config import uses_agent_loop

    if not uses_agent_loop(config):
        return []
    from verl.experimental.agent_loop.agent_loop import load_agent_loop_config, registered_agent_loops

    agent = config.actor_rollout_ref.rollout.agent
    names = set(registered_agent_loops())
    if agent.agent_loop_config_path:
        names |= set(load_agent_loop_config(agent.agent_loop_config_path))
    if agent.default_agent_loop in names:
        return []
    return [_bad("actor_rollout_ref.rollout.agent.default_agent_loop", agent.default_agent_loop, names)]


def check_data_sources(config: Any, datasets: dict[str, Any], compute_score: Any = None, manager: Any = None) -> None:
    """Every ``data_source`` (``data.reward_fn_key``) value of ``datasets`` (``{config key: dataset}``) has a rule
    scorer, unless something else scores the rows: a ``compute_score`` / ``custom_reward_function.path``, a reward
    model, or a ``manager`` (the reward manager built) that is not one of verl's own. One ConfigError names the
    unknown sources, their dataset and the fixes; without it the first training batch would fail after the models
    loaded."""
    from verl.utils.reward_score import has_scorer, registered_data_sources

    if compute_score is not None or config.custom_reward_function.path or config.reward_model.enable:
        return
    if manager is not None and not type(manager).__module__.startswith("verl."):
        return  # a manager of the user's own: it may score rows its own way
    key = config.data.reward_fn_key
    problems = []
    for where, dataset in datasets.items():
        items = getattr(dataset, "items", None)
        if not isinstance(items, list):
            continue  # a dataset of the user's own class: its rows are read as they come
        unknown = sorted({str(item.get(key)) for item in items if not has_scorer(item.get(key))})
        if unknown:
            problems.append(f"{where}: {key} values {unknown}")
    if problems:
        raise ConfigError(
            "no reward scorer for these data sources:\n  "
            + "\n  ".join(problems)
            + f"\nknown data sources: {', '.join(registered_data_sources())}. Score them with a function of your own "
            "(custom_reward_function.path=<file.py> custom_reward_function.name=<function>), a reward model "
            "(reward_model.enable=true), or register a scorer (verl.utils.reward_score.register_scorer)"
        )
