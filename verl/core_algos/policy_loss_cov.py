"""Clip-Cov and KL-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language
Models"): entropy collapses through the few tokens whose log-prob and advantage covary strongly, so these losses
restrain exactly those tokens. Call convention and options: see ``policy_loss``.

Per valid token, cov_t = (A_t - mean(A)) * (logp_t - mean(logp)), the means over the batch's valid tokens.
Shapes: ``(bs, response_length)`` inputs, aligned with ``response_mask``; each returns (pg_loss scalar, metrics).
"""

from __future__ import annotations

from typing import Any

import torch

from ._config import typed_section
from .functional import masked_mean
from .policy_loss import _ACTOR, _aggregate, _clip_ranges, _metrics, _weighted, register_policy_loss

__all__ = ["compute_policy_loss_clip_cov", "compute_policy_loss_kl_cov"]


@register_policy_loss("clip_cov")
def compute_policy_loss_clip_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clip-Cov: among the tokens PPO did not already clip whose cov_t lies in (clip_cov_lb, clip_cov_ub), pick
    k = max(1, int(clip_cov_ratio * #valid)) at random (torch's global RNG) and drop them from the loss:

        l_t = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)) * (0 if t picked else 1),   r = exp(logp - logp_old)

    (times rollout_is_weights, when given). Options: ``config.policy_loss.clip_cov_ratio``, ``clip_cov_lb``,
    ``clip_cov_ub``. Metrics: pg_clipfrac = the fraction of picked tokens; ppo_kl.
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_clip_cov")
    clip_low, clip_high = _clip_ranges(config)
    options = config.policy_loss
    clip_cov_ratio, clip_cov_lb, clip_cov_ub = options.clip_cov_ratio, options.clip_cov_lb, options.clip_cov_ub
    if clip_cov_ratio <= 0:
        raise ValueError(f"clip_cov_ratio must be > 0, got {clip_cov_ratio}")

    log_ratio = log_prob - old_log_prob
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)

    with torch.no_grad():
        valid = response_mask > 0
        cov = (advantages - masked_mean(advantages, response_mask)) * (log_prob - masked_mean(log_prob, response_mask))
        candidates = valid & ~(loss_clipped > loss_unclipped) & (cov > clip_cov_lb) & (cov < clip_cov_ub)
        candidate_idx = torch.nonzero(candidates)
        n_pick = min(max(int(clip_cov_ratio * valid.sum().item()), 1), len(candidate_idx))
        picked = candidate_idx[torch.randperm(len(candidate_idx))[:n_pick].to(candidate_idx.device)]
        keep = torch.ones_like(advantages)
        keep[picked[:, 0], picked[:, 1]] = 0.0

    pg_losses = _weighted(torch.maximum(loss_unclipped, loss_clipped) * keep, rollout_is_weights)
    pg_loss = _aggregate(pg_losses, response_mask, loss_agg_mode, config)
    pg_clipfrac = masked_mean((keep == 0).to(log_prob.dtype), response_mask)
    return pg_loss, _metrics(pg_clipfrac=pg_clipfrac, ppo_kl=ppo_kl)


@register_policy_loss("kl_cov")
def compute_policy_loss_kl_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """KL-Cov: unclipped policy gradient, plus a KL penalty on the k = max(1, int(kl_cov_ratio * #valid)) valid
    tokens with the largest covariance:

        l_t = -A_t r_t + (ppo_kl_coef * |logp_t - logp_old_t|  if t is in the top-k)      r = exp(logp - logp_old)

    (times rollout_is_weights, when given). Options: ``config.policy_loss.kl_cov_ratio``, ``ppo_kl_coef``.
    Metric: ppo_kl = masked_mean |logp - logp_old| (as verl).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_kl_cov")
    kl_cov_ratio, ppo_kl_coef = config.policy_loss.kl_cov_ratio, config.policy_loss.ppo_kl_coef
    if kl_cov_ratio <= 0:
        raise ValueError(f"kl_cov_ratio must be > 0, got {kl_cov_ratio}")

    log_ratio = log_prob - old_log_prob
    abs_kl = log_ratio.abs()
    ratio = torch.exp(log_ratio)
    ppo_kl_abs = masked_mean(abs_kl, response_mask)

    with torch.no_grad():
        valid = (response_mask > 0).reshape(-1)
        valid_idx = torch.nonzero(valid).squeeze(-1)
        penalised = torch.zeros_like(valid)
        if valid_idx.numel() > 0:
            adv = advantages.detach().reshape(-1)[valid_idx]
            logp = log_prob.detach().reshape(-1)[valid_idx]
            cov = (adv - adv.mean()) * (logp - logp.mean())
            k = max(1, int(valid_idx.numel() * kl_cov_ratio))
            penalised[valid_idx[torch.topk(cov, k).indices]] = True
        penalised = penalised.reshape(advantages.shape)

    pg_losses = -advantages * ratio + torch.where(penalised, ppo_kl_coef * abs_kl, torch.zeros_like(abs_kl))
    pg_loss = _aggregate(_weighted(pg_losses, rollout_is_weights), response_mask, loss_agg_mode, config)
    return pg_loss, _metrics(ppo_kl=ppo_kl_abs)
