"""Policy losses and their registry; the token-level losses (PPO clip, CISPO, GPG, DRO, REINFORCE).

Each loss is registered under ``actor.policy_loss.loss_mode`` and called as verl calls it::

    fn = get_policy_loss_fn(actor_config.policy_loss.loss_mode)        # "vanilla", "gspo", ...
    pg_loss, pg_metrics = fn(
        old_log_prob=..., log_prob=..., advantages=..., response_mask=...,
        loss_agg_mode=..., config=actor_config, rollout_is_weights=None,
    )

``pg_loss`` is a scalar tensor, ``pg_metrics`` a dict of floats (``actor/pg_clipfrac``, ``actor/ppo_kl``,
``actor/pg_clipfrac_lower``, whichever the loss defines). ``config`` is the typed actor section (the worker's
``ActorConfig``, or a ``DictConfig`` built from it), read as attributes: ``clip_ratio_low``, ``clip_ratio_high``,
``clip_ratio_c``, ``tau_pos`` / ``tau_neg`` and the per-loss options under ``config.policy_loss`` (verl's layout);
their defaults are the schema's. A dict or None is converted by ``verl.trainer.ppo.core_algos`` (package docstring).
``rollout_is_weights`` (bs, response_length), when given, multiplies the per-token losses: the importance weights
that correct for the rollout engine's sampling distribution (e.g. ``truncated_is_weights``).
``config.global_batch_info`` (``dp_size``, ``batch_num_tokens``, ``global_batch_size``, ``loss_scale_factor``;
verl's field, filled by its worker), when not empty, is passed on to ``agg_loss``; empty, a loss aggregates its
micro-batch locally (our workers weight it, ``aggregation``).

The sequence-level losses (GSPO, GMPO, SAPO) live in ``policy_loss_sequence``, the covariance ones (Clip-Cov,
KL-Cov) in ``policy_loss_cov``, DPPO in ``policy_loss_dppo``; all register here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._config import typed_section
from .aggregation import agg_loss
from .functional import masked_mean

__all__ = [
    "POLICY_LOSS_AGG_MODE",
    "POLICY_LOSS_REGISTRY",
    "compute_policy_loss",
    "compute_policy_loss_cispo",
    "compute_policy_loss_dro",
    "compute_policy_loss_gpg",
    "compute_policy_loss_reinforce",
    "compute_policy_loss_vanilla",
    "effective_loss_agg_mode",
    "get_policy_loss_fn",
    "register_policy_loss",
    "truncated_is_weights",
]

# --------------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------------

PolicyLossFn = Callable[..., tuple[torch.Tensor, dict[str, Any]]]

POLICY_LOSS_REGISTRY: dict[str, PolicyLossFn] = {}


def register_policy_loss(name: str) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator: register a policy loss under ``name`` (``actor.policy_loss.loss_mode``); a later one replaces it."""

    def decorator(fn: PolicyLossFn) -> PolicyLossFn:
        POLICY_LOSS_REGISTRY[name] = fn
        return fn

    return decorator


# Policy losses whose objective fixes the aggregation: the paper's average, whatever actor.loss_agg_mode says.
POLICY_LOSS_AGG_MODE: dict[str, str] = {
    "gspo": "seq-mean-token-mean",  # GSPO: (1/G) sum_i over sequences
    "sapo": "seq-mean-token-mean",  # SAPO: the same sequence-level average
    "geo_mean": "seq-mean-token-mean",  # GMPO: one loss per sequence, averaged over sequences
}


def effective_loss_agg_mode(loss_mode: str, loss_agg_mode: str) -> str:
    """The aggregation the actor uses for every loss term (policy, KL, entropy) and for micro-batch weights:
    ``POLICY_LOSS_AGG_MODE[loss_mode]`` when the policy loss fixes one (GSPO, SAPO and GMPO average per sequence, as
    in their papers and in verl), else ``loss_agg_mode``."""
    return POLICY_LOSS_AGG_MODE.get(loss_mode, loss_agg_mode)


def get_policy_loss_fn(name: str) -> PolicyLossFn:
    """The policy loss registered under ``name``; ValueError listing the known names otherwise."""
    if name not in POLICY_LOSS_REGISTRY:
        raise ValueError(f"Unsupported policy loss mode {name!r}. Registered: {sorted(POLICY_LOSS_REGISTRY)}")
    return POLICY_LOSS_REGISTRY[name]


# --------------------------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------------------------


_ACTOR = "actor (actor_rollout_ref.actor)"  # the section every policy loss reads, named in its TypeError


def _clip_ranges(config: Any) -> tuple[float, float]:
    """(eps_low, eps_high) = (``clip_ratio_low``, ``clip_ratio_high``)."""
    return config.clip_ratio_low, config.clip_ratio_high


_GLOBAL_BATCH_KEYS = ("dp_size", "batch_num_tokens", "global_batch_size", "loss_scale_factor")


def _global_batch_info(config: Any) -> dict[str, Any]:
    """``agg_loss``'s global-normalisation arguments from ``config.global_batch_info`` (verl's worker fills it per
    micro-batch, ``loss_scale_factor`` included); empty, i.e. local aggregation, when the worker leaves it empty."""
    info = config.global_batch_info
    return {key: info[key] for key in _GLOBAL_BATCH_KEYS if key in info and info[key] is not None}


def _aggregate(pg_losses: torch.Tensor, response_mask: torch.Tensor, loss_agg_mode: str, config: Any) -> torch.Tensor:
    return agg_loss(pg_losses, response_mask, loss_agg_mode, **_global_batch_info(config))


def _weighted(pg_losses: torch.Tensor, rollout_is_weights: torch.Tensor | None) -> torch.Tensor:
    return pg_losses if rollout_is_weights is None else pg_losses * rollout_is_weights


def _metrics(**values: torch.Tensor | float) -> dict[str, float]:
    """``{"actor/<name>": float}``: metrics leave the loss as plain numbers, detached (as verl's)."""
    return {f"actor/{k}": float(v.detach()) if torch.is_tensor(v) else float(v) for k, v in values.items()}


def truncated_is_weights(
    old_log_prob: torch.Tensor, rollout_log_probs: torch.Tensor | None, cap: float
) -> torch.Tensor | None:
    """Truncated importance sampling for the rollout/trainer mismatch (Yao et al. 2025, "Your Efficient RL Framework
    Secretly Brings You Off-Policy RL Training"): w_t = sg(min(exp(old_log_prob_t - rollout_log_prob_t), cap)), the
    ``rollout_is_weights`` for a policy loss; None (no correction) without rollout log-probs or with ``cap <= 0``.
    Shapes: (bs, response_length) -> (bs, response_length)."""
    if rollout_log_probs is None or cap <= 0:
        return None
    return torch.clamp(torch.exp(old_log_prob - rollout_log_probs), max=cap).detach()


def _truncated_is(
    pg_losses: torch.Tensor, old_log_prob: torch.Tensor, rollout_log_probs: torch.Tensor | None, config: Any
) -> torch.Tensor:
    """``pg_losses`` times ``truncated_is_weights`` with the cap ``config.tis_imp_ratio_cap`` (unchanged when <= 0)."""
    weights = truncated_is_weights(old_log_prob, rollout_log_probs, config.tis_imp_ratio_cap)
    return _weighted(pg_losses, weights)


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


# --------------------------------------------------------------------------------------------------------------------
# Token-level policy losses
# --------------------------------------------------------------------------------------------------------------------


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
    """verl's deprecated PPO clip loss with plain arguments; same formula as ``compute_policy_loss_vanilla``, and
    still verl's four outputs (pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower), all scalar tensors.

    ``cliprange_low`` / ``cliprange_high`` default to ``cliprange``, which defaults to 0.2.
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
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped surrogate (Schulman et al. 2017, "Proximal Policy Optimization Algorithms") with asymmetric
    clip-higher bounds (Yu et al. 2025, "DAPO") and dual clip for negative advantages (Ye et al. 2020, "Mastering
    Complex Control in MOBA Games with Deep RL"). Per token, with r = exp(clamp(logp - logp_old, -20, 20)):

        l     = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high))
        l     = min(l, -A c)                     if A < 0      (c = clip_ratio_c > 1 bounds the loss of a
                                                                negative-advantage token whose ratio exploded)
        l     = l * w                                          (w = rollout_is_weights, when given)

    Metrics: pg_clipfrac = fraction of tokens where the clipped term wins; pg_clipfrac_lower = fraction where the
    dual clip is active; ppo_kl = masked mean of (logp_old - logp), the k1 estimate of KL(old || new).

    Shapes: (bs, response_length) inputs -> (pg_loss scalar, metrics).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_vanilla")
    clip_low, clip_high = _clip_ranges(config)
    pg_losses, pg_clipfrac, ppo_kl, pg_clipfrac_lower = _dual_clip_ppo_losses(
        old_log_prob, log_prob, advantages, response_mask, clip_low, clip_high, config.clip_ratio_c
    )
    pg_loss = _aggregate(_weighted(pg_losses, rollout_is_weights), response_mask, loss_agg_mode, config)
    return pg_loss, _metrics(pg_clipfrac=pg_clipfrac, ppo_kl=ppo_kl, pg_clipfrac_lower=pg_clipfrac_lower)


@register_policy_loss("cispo")
def compute_policy_loss_cispo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped IS-weight Policy Optimization (MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with
    Lightning Attention"). Clip the importance weight, not the update, so every token keeps a gradient:

        r_t = exp(clamp(logp_t - logp_old_t, -20, 20)),   w_t = sg(clip(r_t, 1 - eps_low, 1 + eps_high))
        l_t = -w_t * A_t * logp_t                          (times rollout_is_weights, when given)

    The paper tunes only eps_high (eps_low large); here both come from clip_ratio_low / clip_ratio_high.
    pg_clipfrac = fraction of tokens whose weight was clipped (either bound); pg_clipfrac_lower = fraction clipped
    at the lower bound; ppo_kl = masked mean of (logp_old - logp).

    Shapes: (bs, response_length) inputs -> (pg_loss scalar, metrics).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_cispo")
    clip_low, clip_high = _clip_ranges(config)
    log_ratio = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(log_ratio)
    ppo_kl = masked_mean(-log_ratio, response_mask)
    weight = torch.clamp(ratio, 1 - clip_low, 1 + clip_high).detach()

    pg_losses = _weighted(-weight * advantages * log_prob, rollout_is_weights)
    pg_loss = _aggregate(pg_losses, response_mask, loss_agg_mode, config)
    below = ratio < 1 - clip_low
    above = ratio > 1 + clip_high
    pg_clipfrac = masked_mean((below | above).to(log_prob.dtype), response_mask)
    pg_clipfrac_lower = masked_mean(below.to(log_prob.dtype), response_mask)
    return pg_loss, _metrics(pg_clipfrac=pg_clipfrac, ppo_kl=ppo_kl, pg_clipfrac_lower=pg_clipfrac_lower)


@register_policy_loss("gpg")
def compute_policy_loss_gpg(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Group Policy Gradient (Chu et al. 2025, "GPG: A Simple and Strong RL Baseline for Model Reasoning"): plain
    REINFORCE with no ratio and no clipping,

        l_t = -logp_t * A_t                      (times rollout_is_weights, when given)

    No metrics (as verl). Shapes: (bs, response_length) inputs -> (pg_loss scalar, {}).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_gpg")
    pg_losses = _weighted(-log_prob * advantages, rollout_is_weights)
    return _aggregate(pg_losses, response_mask, loss_agg_mode, config), {}


@register_policy_loss("dro")
def compute_policy_loss_dro(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Direct Reward Optimisation (Richemond et al. 2024, "Offline Regularised Reinforcement Learning for Large
    Language Models Alignment"): a policy gradient with a quadratic penalty on the log-ratio instead of a clip,

        l_t = -(logp_t A_t - (beta / 2) (logp_t - logp_old_t)^2)     (times rollout_is_weights, when given)

    beta = ``policy_loss.dro_beta``, required and > 0. Metric: ppo_kl = masked mean of (logp_old - logp).
    Shapes: (bs, response_length) inputs -> (pg_loss scalar, metrics).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_dro")
    beta = config.policy_loss.dro_beta
    if beta is None or beta <= 0:
        raise ValueError(
            f"policy_loss.loss_mode=dro needs a positive actor.policy_loss.dro_beta (the weight of its quadratic "
            f"log-ratio penalty), got {beta}"
        )
    log_ratio = log_prob - old_log_prob
    pg_losses = _weighted(-(log_prob * advantages - 0.5 * beta * log_ratio.square()), rollout_is_weights)
    pg_loss = _aggregate(pg_losses, response_mask, loss_agg_mode, config)
    return pg_loss, _metrics(ppo_kl=masked_mean(-log_ratio, response_mask))


def compute_policy_loss_reinforce(
    rollout_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-sum",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """REINFORCE (Williams 1992) on samples from the rollout policy, optionally importance-corrected:

        l_t = -A_t logp_t                        (on-policy)
        l_t = -w_t A_t logp_t                    (w = rollout_is_weights ~ pi / pi_rollout, detached by the caller)

    Not registered as a loss mode (verl reaches it through rollout correction's bypass mode); the default
    aggregation sums each sequence's tokens, as the REINFORCE estimator does. Metric: ppo_kl = masked mean of
    (rollout_logp - logp), the k1 estimate of KL(rollout || current).

    Shapes: (bs, response_length) inputs -> (pg_loss scalar, metrics).
    """
    config = typed_section(config, _ACTOR, "compute_policy_loss_reinforce")
    pg_losses = _weighted(-advantages * log_prob, rollout_is_weights)
    pg_loss = _aggregate(pg_losses, response_mask, loss_agg_mode, config)
    return pg_loss, _metrics(ppo_kl=masked_mean(rollout_log_prob - log_prob, response_mask))
