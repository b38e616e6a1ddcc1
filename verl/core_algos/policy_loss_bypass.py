"""Bypass mode (verl's ``algorithm.rollout_correction.bypass_mode``): the sampler's log-probs serve as the old ones, so
the step skips the actor's old-log-prob pass, and the loss corrects for the sampler itself.

Two policies instead of three: the responses come from pi_rollout and the trainer takes
log pi_old := log pi_rollout (``rollout_log_probs``). The correction is then measured inside the loss, against the
policy being trained, rho_t = pi_theta(y_t) / pi_rollout(y_t) (detached), with the same options as the decoupled
correction (`verl.core_algos.rollout_correction`): ``rollout_is`` weights w = min(rho, C) per token, sequence or
geometric mean, and ``rollout_rs`` rejection, which takes tokens or rows out of the loss's mask. ``loss_type`` picks
the loss:

    ppo_clip   l_t = max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high))     r_t = pi_theta / pi_rollout
               (the vanilla PPO loss; its ratio already is the importance ratio, so no weight multiplies it)
    reinforce  l_t = -w_t A_t log pi_theta(y_t)                                   (w_t = 1 without rollout_is)

On the first mini-batch of a step pi_theta is the policy that sampled (up to the sampler's and the trainer's float
rounding), so rho ~ 1 there; later mini-batches and epochs move away from it, as with a computed pi_old.

Shapes: ``(bs, response_length)`` inputs, aligned with ``response_mask``; returns (pg_loss scalar, metrics).
"""

from __future__ import annotations

from typing import Any

import torch

from ._config import typed_section
from .policy_loss import _ACTOR, compute_policy_loss_reinforce, compute_policy_loss_vanilla, register_policy_loss
from .rollout_correction import compute_rollout_correction

__all__ = ["BYPASS_LOSS_TYPES", "compute_policy_loss_bypass_mode"]

BYPASS_LOSS_TYPES = ("ppo_clip", "reinforce")


@register_policy_loss("bypass_mode")
def compute_policy_loss_bypass_mode(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The bypass-mode loss (formulas in the module docstring). ``old_log_prob`` is the sampler's log-probs;
    ``config.policy_loss.rollout_correction`` holds ``algorithm.rollout_correction`` (the trainer puts it there when
    ``bypass_mode`` is on; the actor section types it as a ``RolloutCorrectionConfig``). ``rollout_is_weights`` from the caller are not used: this loss measures its own against
    the current policy. Metrics: the chosen loss's, plus verl's ``rollout_corr/`` ones of this micro-batch."""
    config = typed_section(config, _ACTOR, "compute_policy_loss_bypass_mode")
    rc = config.policy_loss.rollout_correction
    if rc is None:
        raise ValueError(
            "policy_loss.loss_mode=bypass_mode needs the rollout correction settings in "
            "actor.policy_loss.rollout_correction: set algorithm.rollout_correction.bypass_mode=true and the "
            "trainer fills them in (a script calling this loss passes them itself)"
        )
    loss_type = rc.loss_type
    if loss_type not in BYPASS_LOSS_TYPES:
        raise ValueError(
            f"algorithm.rollout_correction.loss_type={loss_type!r}: use one of {', '.join(BYPASS_LOSS_TYPES)}"
        )
    with torch.no_grad():
        weights, mask, corr_metrics = compute_rollout_correction(
            log_prob.detach(),
            old_log_prob,
            response_mask,
            rollout_is=rc.rollout_is,
            rollout_is_threshold=rc.rollout_is_threshold,
            rollout_is_batch_normalize=rc.rollout_is_batch_normalize,
            rollout_rs=rc.rollout_rs,
            rollout_rs_threshold=rc.rollout_rs_threshold,
        )
    mask = mask.to(response_mask.dtype)
    if loss_type == "reinforce":
        pg_loss, metrics = compute_policy_loss_reinforce(
            old_log_prob, log_prob, advantages, mask, loss_agg_mode, config, rollout_is_weights=weights
        )
    else:  # the PPO ratio is the importance ratio already: a weight on top would count it twice
        pg_loss, metrics = compute_policy_loss_vanilla(
            old_log_prob, log_prob, advantages, mask, loss_agg_mode, config, rollout_is_weights=None
        )
    return pg_loss, {**metrics, **corr_metrics}
