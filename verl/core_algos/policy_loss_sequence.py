"""Policy losses that treat the response as the unit: GSPO (one ratio per sequence), GMPO (the geometric mean of
the token ratios) and SAPO (a soft gate in place of the clip, averaged per sequence). All three average over
sequences (``POLICY_LOSS_AGG_MODE``). Call convention and options: see ``policy_loss``.

Shapes: ``(bs, response_length)`` inputs, aligned with ``response_mask``; each returns (pg_loss scalar, metrics).
"""

from __future__ import annotations

from typing import Any

import torch

from ._config import typed_section
from .functional import masked_mean, masked_sum
from .policy_loss import _ACTOR, _aggregate, _clip_ranges, _metrics, _weighted, register_policy_loss

__all__ = ["compute_policy_loss_geo_mean", "compute_policy_loss_gspo", "compute_policy_loss_sapo"]


@register_policy_loss("gspo")
def compute_policy_loss_gspo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Group Sequence Policy Optimization (Zheng et al. 2025, "Group Sequence Policy Optimization").

    One importance ratio per sequence, the geometric mean of its token ratios:

        s_i     = exp( (1/|y_i|) sum_t m_t (logp_t - logp_old_t) )
        s_{i,t} = sg(s_i) * pi(y_t) / sg(pi(y_t))  -> in log space: sg(log s_i) + logp_t - sg(logp_t), clamped <= 10
        l_{i,t} = max(-A s_{i,t}, -A clip(s_{i,t}, 1 - eps_low, 1 + eps_high))     (times rollout_is_weights)

    The value of s_{i,t} equals s_i while each token's gradient is s_i * grad logp_t. ``loss_agg_mode`` defaults to
    "seq-mean-token-mean" (the paper's sequence-level average; the actor always uses it). pg_clipfrac_lower is 0.
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_gspo")
    clip_low, clip_high = _clip_ranges(config)
    log_ratio = log_prob - old_log_prob
    seq_lengths = response_mask.to(log_prob.dtype).sum(dim=-1).clamp(min=1)
    seq_log_ratio = masked_sum(log_ratio, response_mask, dim=-1) / seq_lengths
    log_token_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(torch.clamp(log_token_ratio, max=10.0))

    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    pg_losses = _weighted(torch.maximum(loss_unclipped, loss_clipped), rollout_is_weights)
    pg_loss = _aggregate(pg_losses, response_mask, loss_agg_mode, config)

    pg_clipfrac = masked_mean((loss_clipped > loss_unclipped).to(log_prob.dtype), response_mask)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    return pg_loss, _metrics(pg_clipfrac=pg_clipfrac, ppo_kl=ppo_kl, pg_clipfrac_lower=0.0)


@register_policy_loss("geo_mean")
def compute_policy_loss_geo_mean(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Geometric-Mean Policy Optimization (GMPO, arXiv 2507.20673).

    GRPO's arithmetic mean of token ratios lets one outlier token dominate; GMPO takes their geometric mean, with
    each token's log-ratio d_t = logp_t - logp_old_t clipped in log space, pessimistically for the advantage's sign:

        d'_t  = sgn(A_t) * min(sgn(A_t) d_t, sgn(A_t) clip(d_t, -eps_low, eps_high))
        rho_i = exp( sum_t m_t d'_t / |y_i| ),     A_i = sum_t m_t A_t / |y_i|   (a sequence-level advantage)
        l_i   = -A_i rho_i * (geometric mean of the sequence's rollout_is_weights, when given)
        loss  = mean_i l_i                          (over sequences holding a token; ``loss_agg_mode`` is unused)

    pg_clipfrac / pg_clipfrac_lower = fraction of tokens with d_t outside [-eps_low, eps_high] and A_t > 0 / < 0;
    ppo_kl = masked mean of (logp_old - logp). verl averages over every row; rows without a response token carry no
    loss, and leaving them out keeps the micro-batch weighting of the sequence means exact.
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_geo_mean")
    clip_low, clip_high = _clip_ranges(config)
    log_ratio = log_prob - old_log_prob
    ppo_kl = masked_mean(-log_ratio, response_mask)
    sign = torch.sign(advantages)
    clamped = torch.clamp(log_ratio, -clip_low, clip_high)
    pessimistic = sign * torch.minimum(sign * log_ratio, sign * clamped)

    lengths = response_mask.to(log_prob.dtype).sum(dim=-1)
    seq_ratio = torch.exp(masked_sum(pessimistic, response_mask, dim=-1) / (lengths + 1e-8))
    seq_adv = masked_sum(advantages, response_mask, dim=-1) / (lengths + 1e-8)
    seq_losses = -seq_adv * seq_ratio
    if rollout_is_weights is not None:
        log_w = torch.log(rollout_is_weights + 1e-10)
        seq_losses = seq_losses * torch.exp(masked_sum(log_w, response_mask, dim=-1) / (lengths + 1e-8))
    # each sequence's loss on its tokens: the sequence mean of the per-sequence token means is mean_i l_i
    pg_losses = seq_losses.unsqueeze(-1).expand_as(log_prob)
    pg_loss = _aggregate(pg_losses, response_mask, "seq-mean-token-mean", config)

    clipped = log_ratio != clamped
    pg_clipfrac = masked_mean((clipped & (advantages > 0)).to(log_prob.dtype), response_mask)
    pg_clipfrac_lower = masked_mean((clipped & (advantages < 0)).to(log_prob.dtype), response_mask)
    return pg_loss, _metrics(pg_clipfrac=pg_clipfrac, ppo_kl=ppo_kl, pg_clipfrac_lower=pg_clipfrac_lower)


@register_policy_loss("sapo")
def compute_policy_loss_sapo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Soft Adaptive Policy Optimization (SAPO, arXiv 2511.20347).

    A hard clip zeroes the gradient of every token outside the trust region; SAPO replaces it with a sigmoid gate
    that fades the gradient smoothly, faster for negative advantages (tau_neg > tau_pos):

        r_t   = exp(clamp(logp_t - logp_old_t, -20, 20))
        tau_t = tau_pos if A_t > 0 else tau_neg
        f(r)  = sigmoid(tau (r - 1)) * 4 / tau       (f(1) = 2 / tau, f'(1) = 1: PPO's gradient at the old policy)
        l_t   = -f(r_t) A_t                          (times rollout_is_weights, when given)

    tau_pos / tau_neg: the actor's ``tau_pos`` and ``tau_neg`` (verl's keys, beside ``clip_ratio``).
    ``loss_agg_mode`` defaults to "seq-mean-token-mean" (the actor always uses it). pg_clipfrac and
    pg_clipfrac_lower are 0 (nothing is clipped); ppo_kl = masked mean of (logp_old - logp).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_sapo")
    tau_pos, tau_neg = float(config.tau_pos), float(config.tau_neg)
    if tau_pos <= 0 or tau_neg <= 0:
        raise ValueError(f"sapo needs tau_pos > 0 and tau_neg > 0 (the gate temperatures), got {tau_pos}, {tau_neg}")
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    tau = torch.where(advantages > 0, torch.full_like(ratio, tau_pos), torch.full_like(ratio, tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    pg_losses = _weighted(-gate * advantages, rollout_is_weights)
    pg_loss = _aggregate(pg_losses, response_mask, loss_agg_mode, config)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    return pg_loss, _metrics(pg_clipfrac=0.0, ppo_kl=ppo_kl, pg_clipfrac_lower=0.0)
