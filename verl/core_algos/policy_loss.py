"""Policy losses and their registry.

Each loss is registered under ``actor.policy_loss.loss_mode`` and called as::

    fn = get_policy_loss_fn(actor_config.policy_loss.loss_mode)        # "vanilla", "gspo", ...
    pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower = fn(
        old_log_prob=..., log_prob=..., advantages=..., response_mask=...,
        loss_agg_mode=..., config=actor_config, rollout_log_probs=None,
    )

All four outputs are scalar tensors. ``config`` carries ``clip_ratio``, ``clip_ratio_low``, ``clip_ratio_high``,
``clip_ratio_c`` and the per-loss keys (``clip_cov_ratio``, ``clip_cov_lb``, ``clip_cov_ub``, ``kl_cov_ratio``,
``ppo_kl_coef``) either under ``config.policy_loss`` (verl's layout) or at the top level. When ``rollout_log_probs``
is given and ``config.tis_imp_ratio_cap > 0``, the per-token losses are multiplied by the truncated importance
weight min(exp(old_log_prob - rollout_log_probs), cap) that corrects for the rollout engine's sampling distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._config import _cfg_get
from .aggregation import agg_loss
from .functional import masked_mean, masked_sum

__all__ = [
    "POLICY_LOSS_AGG_MODE",
    "POLICY_LOSS_REGISTRY",
    "compute_policy_loss",
    "compute_policy_loss_cispo",
    "compute_policy_loss_clip_cov",
    "compute_policy_loss_gpg",
    "compute_policy_loss_gspo",
    "compute_policy_loss_kl_cov",
    "compute_policy_loss_vanilla",
    "effective_loss_agg_mode",
    "get_policy_loss_fn",
    "register_policy_loss",
]

# --------------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------------

PolicyLossFn = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]

POLICY_LOSS_REGISTRY: dict[str, PolicyLossFn] = {}


def register_policy_loss(name: str) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator: register a policy loss under ``name`` (``actor.policy_loss.loss_mode``); a later one replaces it."""

    def decorator(fn: PolicyLossFn) -> PolicyLossFn:
        POLICY_LOSS_REGISTRY[name] = fn
        return fn

    return decorator


# Policy losses whose objective fixes the aggregation: the paper's average, whatever actor.loss_agg_mode says.
POLICY_LOSS_AGG_MODE: dict[str, str] = {"gspo": "seq-mean-token-mean"}  # GSPO: (1/G) sum_i over sequences


def effective_loss_agg_mode(loss_mode: str, loss_agg_mode: str) -> str:
    """The aggregation the actor uses for every loss term (policy, KL, entropy) and for micro-batch weights:
    ``POLICY_LOSS_AGG_MODE[loss_mode]`` when the policy loss fixes one (GSPO averages per sequence, as in the paper
    and in verl), else ``loss_agg_mode``."""
    return POLICY_LOSS_AGG_MODE.get(loss_mode, loss_agg_mode)


def get_policy_loss_fn(name: str) -> PolicyLossFn:
    """The policy loss registered under ``name``; ValueError listing the known names otherwise."""
    if name not in POLICY_LOSS_REGISTRY:
        raise ValueError(f"Unsupported policy loss mode {name!r}. Registered: {sorted(POLICY_LOSS_REGISTRY)}")
    return POLICY_LOSS_REGISTRY[name]


def _policy_loss_option(config: Any, key: str, default: Any) -> Any:
    """A per-loss option: ``config.policy_loss.<key>`` (verl's layout), else ``config.<key>``, else ``default``."""
    return _cfg_get(_cfg_get(config, "policy_loss"), key, _cfg_get(config, key, default))


def _clip_ranges(config: Any) -> tuple[float, float]:
    """(eps_low, eps_high): ``clip_ratio_low`` / ``clip_ratio_high``, each defaulting to ``clip_ratio`` (0.2)."""
    clip_ratio = _cfg_get(config, "clip_ratio", 0.2)
    return _cfg_get(config, "clip_ratio_low", clip_ratio), _cfg_get(config, "clip_ratio_high", clip_ratio)


# --------------------------------------------------------------------------------------------------------------------
# Policy losses
# --------------------------------------------------------------------------------------------------------------------


def _truncated_is(
    pg_losses: torch.Tensor, old_log_prob: torch.Tensor, rollout_log_probs: torch.Tensor | None, config: Any
) -> torch.Tensor:
    """Truncated importance sampling for the rollout/trainer mismatch (Yao et al. 2025, "Your Efficient RL Framework
    Secretly Brings You Off-Policy RL Training"): l_t * min(exp(old_log_prob_t - rollout_log_prob_t), cap), only
    when ``rollout_log_probs`` is given and ``config.tis_imp_ratio_cap > 0``."""
    cap = _cfg_get(config, "tis_imp_ratio_cap", -1)
    if rollout_log_probs is None or cap <= 0:
        return pg_losses
    weight = torch.clamp(torch.exp(old_log_prob - rollout_log_probs), max=cap).detach()
    return pg_losses * weight


def _dual_clip_ppo_losses(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    clip_ratio_c: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token dual-clip PPO losses and the three metrics (see ``compute_policy_loss_vanilla``)."""
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c (the dual-clip bound) must be > 1.0, got {clip_ratio_c}")
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)

    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    loss_ppo = torch.maximum(loss_unclipped, loss_clipped)
    pg_clipfrac = masked_mean((loss_clipped > loss_unclipped).to(log_prob.dtype), response_mask)

    loss_dual = -advantages * clip_ratio_c
    dual_active = (loss_ppo > loss_dual) & (advantages < 0)
    pg_clipfrac_lower = masked_mean(dual_active.to(log_prob.dtype), response_mask)
    pg_losses = torch.where(advantages < 0, torch.minimum(loss_ppo, loss_dual), loss_ppo)
    return pg_losses, pg_clipfrac, ppo_kl, pg_clipfrac_lower


def compute_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange: float | None = None,
    cliprange_low: float | None = None,
    cliprange_high: float | None = None,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """verl's legacy PPO clip loss with plain arguments; same formula as ``compute_policy_loss_vanilla``.

    ``cliprange_low`` / ``cliprange_high`` default to ``cliprange``, which defaults to 0.2.
    Shapes: (bs, response_length) inputs -> (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), scalars.
    """
    cliprange = 0.2 if cliprange is None else cliprange
    low = cliprange if cliprange_low is None else cliprange_low
    high = cliprange if cliprange_high is None else cliprange_high
    pg_losses, pg_clipfrac, ppo_kl, pg_clipfrac_lower = _dual_clip_ppo_losses(
        old_log_prob, log_prob, advantages, response_mask, low, high, clip_ratio_c
    )
    return agg_loss(pg_losses, response_mask, loss_agg_mode), pg_clipfrac, ppo_kl, pg_clipfrac_lower


@register_policy_loss("vanilla")
def compute_policy_loss_vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate (Schulman et al. 2017, "Proximal Policy Optimization Algorithms") with asymmetric
    clip-higher bounds (Yu et al. 2025, "DAPO") and dual clip for negative advantages (Ye et al. 2020, "Mastering
    Complex Control in MOBA Games with Deep RL"). Per token, with r = exp(clamp(logp - logp_old, -20, 20)):

        l     = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))
        l     = min(l, -A c)                     if A < 0      (c = clip_ratio_c > 1 bounds the loss of a
                                                                negative-advantage token whose ratio exploded)

    Metrics: pg_clipfrac = fraction of tokens where the clipped term wins; pg_clipfrac_lower = fraction where the
    dual clip is active; ppo_kl = masked mean of (logp_old - logp), the k1 estimate of KL(old || new).

    Shapes: (bs, response_length) inputs -> (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), scalars.
    """
    clip_low, clip_high = _clip_ranges(config)
    pg_losses, pg_clipfrac, ppo_kl, pg_clipfrac_lower = _dual_clip_ppo_losses(
        old_log_prob, log_prob, advantages, response_mask, clip_low, clip_high, _cfg_get(config, "clip_ratio_c", 3.0)
    )
    pg_losses = _truncated_is(pg_losses, old_log_prob, rollout_log_probs, config)
    return agg_loss(pg_losses, response_mask, loss_agg_mode), pg_clipfrac, ppo_kl, pg_clipfrac_lower


@register_policy_loss("gspo")
def compute_policy_loss_gspo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group Sequence Policy Optimization (Zheng et al. 2025, "Group Sequence Policy Optimization").

    One importance ratio per sequence, the geometric mean of its token ratios:

        s_i     = exp( (1/|y_i|) sum_t m_t (logp_t - logp_old_t) )
        s_{i,t} = sg(s_i) * pi(y_t) / sg(pi(y_t))  -> in log space: sg(log s_i) + logp_t - sg(logp_t), clamped <= 10
        l_{i,t} = max(-A s_{i,t}, -A clip(s_{i,t}, 1 - eps_low, 1 + eps_high))

    The value of s_{i,t} equals s_i while each token's gradient is s_i * grad logp_t. ``loss_agg_mode`` defaults to
    "seq-mean-token-mean" (the paper's sequence-level average). pg_clipfrac_lower is 0.

    Shapes: (bs, response_length) inputs -> (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), scalars.
    """
    clip_low, clip_high = _clip_ranges(config)
    log_ratio = log_prob - old_log_prob
    seq_lengths = response_mask.to(log_prob.dtype).sum(dim=-1).clamp(min=1)
    seq_log_ratio = masked_sum(log_ratio, response_mask, dim=-1) / seq_lengths
    log_token_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(torch.clamp(log_token_ratio, max=10.0))

    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    pg_losses = torch.maximum(loss_unclipped, loss_clipped)
    pg_losses = _truncated_is(pg_losses, old_log_prob, rollout_log_probs, config)
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)

    pg_clipfrac = masked_mean((loss_clipped > loss_unclipped).to(log_prob.dtype), response_mask)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    return pg_loss, pg_clipfrac, ppo_kl, torch.zeros((), dtype=pg_loss.dtype, device=pg_loss.device)


@register_policy_loss("gpg")
def compute_policy_loss_gpg(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group Policy Gradient (Chu et al. 2025, "GPG: A Simple and Strong RL Baseline for Model Reasoning"): plain
    REINFORCE with no ratio and no clipping,

        l_t = -logp_t * A_t

    The three metrics are 0. Shapes: (bs, response_length) inputs -> four scalars.
    """
    pg_losses = _truncated_is(-log_prob * advantages, old_log_prob, rollout_log_probs, config)
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    zero = torch.zeros((), dtype=pg_loss.dtype, device=pg_loss.device)
    return pg_loss, zero, zero.clone(), zero.clone()


@register_policy_loss("clip_cov")
def compute_policy_loss_clip_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clip-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models").

    Entropy collapses through tokens whose log-prob and advantage covary strongly. Per valid token:

        cov_t = (A_t - mean(A)) * (logp_t - mean(logp))                 (means over valid tokens of the batch)

    Among the tokens PPO did not already clip whose cov_t lies in (clip_cov_lb, clip_cov_ub), pick
    k = max(1, int(clip_cov_ratio * #valid)) at random (torch's global RNG) and drop them from the loss:

        l_t = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)) * (0 if t picked else 1),   r = exp(logp - logp_old)

    Options (under ``config.policy_loss`` or top level): clip_cov_ratio (0.0002), clip_cov_lb (1.0),
    clip_cov_ub (5.0). pg_clipfrac is the fraction of picked tokens; pg_clipfrac_lower is 0.

    Shapes: (bs, response_length) inputs -> (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), scalars.
    """
    clip_low, clip_high = _clip_ranges(config)
    clip_cov_ratio = _policy_loss_option(config, "clip_cov_ratio", 0.0002)
    clip_cov_lb = _policy_loss_option(config, "clip_cov_lb", 1.0)
    clip_cov_ub = _policy_loss_option(config, "clip_cov_ub", 5.0)
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

    pg_losses = torch.maximum(loss_unclipped, loss_clipped) * keep
    pg_losses = _truncated_is(pg_losses, old_log_prob, rollout_log_probs, config)
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    pg_clipfrac = masked_mean((keep == 0).to(log_prob.dtype), response_mask)
    return pg_loss, pg_clipfrac, ppo_kl, torch.zeros((), dtype=pg_loss.dtype, device=pg_loss.device)


@register_policy_loss("kl_cov")
def compute_policy_loss_kl_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """KL-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models").

    Unclipped policy gradient, plus a KL penalty on the k = max(1, int(kl_cov_ratio * #valid)) valid tokens with
    the largest covariance cov_t = (A_t - mean(A)) * (logp_t - mean(logp)) (means over valid tokens):

        l_t = -A_t r_t + (ppo_kl_coef * |logp_t - logp_old_t|  if t is in the top-k)      r = exp(logp - logp_old)

    Options (under ``config.policy_loss`` or top level): kl_cov_ratio (0.0002), ppo_kl_coef (1.0).
    ppo_kl reports masked_mean |logp - logp_old| (as verl); pg_clipfrac and pg_clipfrac_lower are 0.

    Shapes: (bs, response_length) inputs -> (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), scalars.
    """
    kl_cov_ratio = _policy_loss_option(config, "kl_cov_ratio", 0.0002)
    ppo_kl_coef = _policy_loss_option(config, "ppo_kl_coef", 1.0)
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
    pg_losses = _truncated_is(pg_losses, old_log_prob, rollout_log_probs, config)
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    zero = torch.zeros((), dtype=pg_loss.dtype, device=pg_loss.device)
    return pg_loss, zero, ppo_kl_abs, zero.clone()


@register_policy_loss("cispo")
def compute_policy_loss_cispo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped IS-weight Policy Optimization (MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with
    Lightning Attention"). Clip the importance weight, not the update, so every token keeps a gradient:

        r_t = exp(clamp(logp_t - logp_old_t, -20, 20)),   w_t = sg(clip(r_t, 1 - eps_low, 1 + eps_high))
        l_t = -w_t * A_t * logp_t

    The paper tunes only eps_high (eps_low large); here both come from clip_ratio_low / clip_ratio_high.
    pg_clipfrac = fraction of tokens whose weight was clipped (either bound); pg_clipfrac_lower = fraction clipped
    at the lower bound; ppo_kl = masked mean of (logp_old - logp).

    Shapes: (bs, response_length) inputs -> (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), scalars.
    """
    clip_low, clip_high = _clip_ranges(config)
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    weight = torch.clamp(ratio, 1 - clip_low, 1 + clip_high).detach()

    pg_losses = _truncated_is(-weight * advantages * log_prob, old_log_prob, rollout_log_probs, config)
    pg_loss = agg_loss(pg_losses, response_mask, loss_agg_mode)
    below = ratio < 1 - clip_low
    above = ratio > 1 + clip_high
    pg_clipfrac = masked_mean((below | above).to(log_prob.dtype), response_mask)
    pg_clipfrac_lower = masked_mean(below.to(log_prob.dtype), response_mask)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower
