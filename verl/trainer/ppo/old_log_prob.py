"""Where a step's old log-probs come from, and when the trainer may skip the old-log-prob pass: the rule, in one
place (``algorithm.rollout_correction.bypass_mode``, ``actor.skip_old_log_prob_on_policy``)."""

from __future__ import annotations

from typing import Any

from verl.trainer.ppo.rollout_correction import corrects

__all__ = ["old_log_prob_is_current", "old_log_prob_source"]


def old_log_prob_source(config: Any, rows: int, has_callbacks: bool, on_policy: bool = True) -> str:
    """``"rollout"``: the sampler's log-probs (verl's bypass mode); ``"update"``: the actor's update computes them
    in its own pass (``old_log_prob_is_current``; never for a batch an older policy version sampled, ``on_policy``
    false, since the update's weights are not the sampler's); ``"pass"``: the old-log-prob pass computes them."""
    if config.algorithm.rollout_correction.bypass_mode:
        return "rollout"
    return "update" if on_policy and old_log_prob_is_current(config, rows, has_callbacks) else "pass"


def old_log_prob_is_current(config: Any, rows: int, has_callbacks: bool) -> bool:
    """Whether the old-log-prob pass would equal the update's own log-probs: one PPO epoch over exactly one
    mini-batch of the batch's ``rows`` (the update runs on the weights that sampled), and nothing reads
    ``old_log_probs`` before the update: no KL in the reward, no rollout correction (its weights and rejection come
    from them) and no step callbacks. The actor then uses its current log-probs, detached, as ``old_log_probs``
    (models without dropout, as Qwen2/Llama configs) and returns them, so the mismatch metrics still come. ``config``:
    the job's; ``actor.skip_old_log_prob_on_policy=false`` turns the skip off."""
    a, alg = config.actor_rollout_ref.actor, config.algorithm
    return (
        a.skip_old_log_prob_on_policy
        and a.ppo_epochs == 1
        and a.ppo_mini_batch_size * config.actor_rollout_ref.rollout.n >= rows
        and not alg.use_kl_in_reward
        and not corrects(alg.rollout_correction)
        and not has_callbacks
    )
