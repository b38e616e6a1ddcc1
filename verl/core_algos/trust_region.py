"""Update-size control: measure how far the policy has moved from the one that sampled the batch, and steer the
learning rate so that each step moves it by about a target KL (``actor_rollout_ref.actor.trust_region``).

A fixed learning rate that suits one task destroys the policy on another (the learning suite,
``benchmarks/learning_suite.py``). PPO's clipping bounds the ratio per token but not how far a whole step moves the
policy; implementations that keep steps safe measure the KL to the sampling policy as they go and either stop the
step's remaining passes once it is too far (the ``target_kl`` early stop of OpenAI Spinning Up / Stable-Baselines3
PPO) or adapt the learning rate toward a target KL (the adaptive schedule of rsl_rl's PPO, Rudin et al. 2022,
"Learning to Walk in Minutes Using Massively Parallel Deep RL"). Both are here, as pure functions of tensors and
numbers; the actor keeps the state (`verl.workers.actor.dp_actor`).

Shapes: ``(bs, response_length)`` tensors aligned with ``response_mask``.
"""

from __future__ import annotations

import torch

__all__ = ["adapt_lr_scale", "policy_drift_kl_sum"]


def policy_drift_kl_sum(
    old_log_prob: torch.Tensor, log_prob: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sum over response tokens of Schulman's k3 estimate of KL(pi_old || pi_theta), and the token count.

    With tokens sampled from pi_old and r = pi_theta(token) / pi_old(token)::

        k3 = (r - 1) - log r        >= 0, unbiased for KL(pi_old || pi_theta)
        drift = sum_tokens(k3 * mask) / sum_tokens(mask)

    Returned as ``(sum, count)`` (0-dim float64 tensors) so micro-batches and data-parallel ranks add up exactly
    before the one division. ``log r`` is clamped to [-20, 20] as the KL loss's own estimate is.
    """
    log_ratio = torch.clamp(log_prob.detach().double() - old_log_prob.double(), min=-20.0, max=20.0)
    k3 = torch.expm1(log_ratio) - log_ratio
    mask = response_mask.double()
    return (k3 * mask).sum(), mask.sum()


def adapt_lr_scale(
    scale: float,
    drift_kl: float,
    target_kl: float,
    factor: float,
    min_scale: float,
    max_scale: float,
    increase_factor: float | None = None,
) -> float:
    """One step of the KL-adaptive learning rate (rsl_rl's rule, with its rise and fall set apart): the multiplier
    of the scheduled learning rate.

    ::

        scale' = scale / factor            if drift_kl > 2 * target_kl     (moved too far: smaller steps)
               = scale * increase_factor   if drift_kl < target_kl / 2     (barely moved: larger steps)
               = scale                     otherwise
        then clamped to [min_scale, max_scale]

    ``increase_factor`` None is ``factor`` (rsl_rl's symmetric rule). A smaller rise than fall (the bold driver rule,
    Vogl et al. 1988) keeps the rate from bouncing on noisy drift readings while still cutting it fast where a step
    went too far; the rate settles where about ln(increase) / (ln(increase) + ln(factor)) of the out-of-band
    readings are over the band.
    """
    if drift_kl > 2.0 * target_kl:
        scale = scale / factor
    elif drift_kl < 0.5 * target_kl:
        scale = scale * (factor if increase_factor is None else increase_factor)
    return float(min(max_scale, max(min_scale, scale)))
