"""DPPO: a trust region on the divergence between the new and the old policy at each sampled token, in place of
PPO's clip on the probability ratio (arXiv 2602.04879, "Rethinking the Trust Region in LLM Reinforcement Learning").

The ratio r = pi / pi_old is a poor proxy for how far the policy moved: for a rare token a large ratio is a tiny
change of probability, for a likely one a ratio near 1 can be a large one. DPPO measures the move on the binary
distribution (the sampled token vs everything else) and drops the gradient of a token only when the update would
push that divergence past delta *in the direction its advantage pushes*:

    p = exp(logp), p_old = exp(logp_old)
    v_t = 1 unless p moved in the direction A_t pushes it (up for A > 0, down otherwise) by more than delta_high
          (up) / delta_low (down), measured by D(p_old, p)
    l_t = -A_t * sg(min(r_t, c)) * logp_t * v_t                               (times rollout_is_weights)

sg(min(r, c)) is truncated importance sampling instead of the dual clip, c = the actor's ``clip_ratio_c`` (verl's
key for it; 3 by default, the schema's and verl's ``ActorConfig``'s: raise it for the paper's large cap).
delta_low / delta_high are ``clip_ratio_low`` / ``clip_ratio_high``: for DPPO they are divergence thresholds, not
ratio bounds. Metrics: pg_clipfrac = the fraction of tokens outside the trust region (v = 0); pg_clipfrac_lower =
the fraction inside it whose ratio was truncated at c; ppo_kl = masked mean of (logp_old - logp).

Shapes: ``(bs, response_length)`` inputs, aligned with ``response_mask``; each returns (pg_loss scalar, metrics).
"""

from __future__ import annotations

from typing import Any

import torch

from ._config import typed_section
from .functional import masked_mean
from .policy_loss import _ACTOR, _aggregate, _clip_ranges, _metrics, _weighted, register_policy_loss

__all__ = ["compute_policy_loss_dppo_kl", "compute_policy_loss_dppo_tv"]


def _dppo_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    in_region: torch.Tensor,
    loss_agg_mode: str,
    config: Any,
    rollout_is_weights: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    cap = config.clip_ratio_c
    keep = in_region.detach().to(log_prob.dtype)
    pg_losses = -advantages * torch.clamp(ratio, max=cap).detach() * log_prob * keep
    pg_loss = _aggregate(_weighted(pg_losses, rollout_is_weights), response_mask, loss_agg_mode, config)
    pg_clipfrac = masked_mean(1.0 - keep, response_mask)
    pg_clipfrac_lower = masked_mean((ratio > cap).to(log_prob.dtype) * keep, response_mask)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    return pg_loss, _metrics(pg_clipfrac=pg_clipfrac, ppo_kl=ppo_kl, pg_clipfrac_lower=pg_clipfrac_lower)


@register_policy_loss("dppo_tv")
def compute_policy_loss_dppo_tv(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DPPO with the binary total variation, D = |p - p_old|, signed by the advantage's direction:

        v_t = (p - p_old <= delta_high)   if A_t > 0      (raising p is bounded)
              (p - p_old >= -delta_low)   otherwise       (lowering p is bounded)

    The rest: see the module docstring.
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_dppo_tv")
    delta_low, delta_high = _clip_ranges(config)
    move = torch.exp(log_prob) - torch.exp(old_log_prob)
    in_region = torch.where(advantages > 0, move <= delta_high, move >= -delta_low)
    return _dppo_loss(
        old_log_prob, log_prob, advantages, response_mask, in_region, loss_agg_mode, config, rollout_is_weights
    )


@register_policy_loss("dppo_kl")
def compute_policy_loss_dppo_kl(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """DPPO with the binary KL divergence KL(Bern(p_old) || Bern(p)):

        D   = p_old (logp_old - logp) + (1 - p_old) log((1 - p_old + 1e-8) / (1 - p + 1e-8))
        v_t = (D <= delta_high) or (p <= p_old)    if A_t > 0      (only a rise of p is bounded)
              (D <= delta_low)  or (p >= p_old)    otherwise       (only a fall of p is bounded)

    The rest: see the module docstring.
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_dppo_kl")
    delta_low, delta_high = _clip_ranges(config)
    prob, old_prob = torch.exp(log_prob), torch.exp(old_log_prob)
    binary_kl = old_prob * (old_log_prob - log_prob) + (1 - old_prob) * torch.log(
        (1.0 - old_prob + 1e-8) / (1.0 - prob + 1e-8)
    )
    rise_ok = (binary_kl <= delta_high) | (prob <= old_prob)
    fall_ok = (binary_kl <= delta_low) | (prob >= old_prob)
    in_region = torch.where(advantages > 0, rise_ok, fall_ok)
    return _dppo_loss(
        old_log_prob, log_prob, advantages, response_mask, in_region, loss_agg_mode, config, rollout_is_weights
    )
