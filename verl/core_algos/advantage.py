"""Advantage estimators and their registry (``algorithm.adv_estimator``).

Each estimator is registered under verl's name (``AdvantageEstimator``) and is called by the trainer with keyword
arguments only, in one uniform call::

    fn = get_adv_estimator_fn(config.algorithm.adv_estimator)          # "gae", "grpo", ...
    advantages, returns = fn(
        token_level_rewards=..., response_mask=..., index=..., values=..., reward_baselines=...,
        gamma=..., lam=..., norm_adv_by_std_in_grpo=..., config=config.algorithm,
    )

An estimator takes the arguments it needs and ignores the rest (``**kwargs``), so a custom estimator registered
with ``@register_adv_est("my_name")`` only has to accept ``**kwargs`` too. ``index`` holds one group id (the prompt's
``uid``) per response, as a numpy object array. Both outputs have shape ``(bs, response_length)`` and are zero
outside ``response_mask``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np
import torch

from ._config import typed_section
from .functional import masked_whiten

__all__ = [
    "ADV_ESTIMATOR_REGISTRY",
    "AdvantageEstimator",
    "compute_gae_advantage_return",
    "compute_gpg_outcome_advantage",
    "compute_grpo_outcome_advantage",
    "compute_grpo_passk_outcome_advantage",
    "compute_grpo_vectorized_outcome_advantage",
    "compute_opo_outcome_advantage",
    "compute_reinforce_plus_plus_baseline_outcome_advantage",
    "compute_reinforce_plus_plus_outcome_advantage",
    "compute_remax_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_rloo_vectorized_outcome_advantage",
    "get_adv_estimator_fn",
    "register_adv_est",
]

# --------------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------------

AdvEstimatorFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]

ADV_ESTIMATOR_REGISTRY: dict[str, AdvEstimatorFn] = {}


class AdvantageEstimator(str, Enum):
    """verl's advantage-estimator names (``algorithm.adv_estimator``). Plain strings work everywhere too."""

    GAE = "gae"
    GRPO = "grpo"
    REINFORCE_PLUS_PLUS = "reinforce_plus_plus"
    REINFORCE_PLUS_PLUS_BASELINE = "reinforce_plus_plus_baseline"
    REMAX = "remax"
    RLOO = "rloo"
    OPO = "opo"
    GRPO_PASSK = "grpo_passk"
    GPG = "gpg"
    RLOO_VECTORIZED = "rloo_vectorized"
    GRPO_VECTORIZED = "grpo_vectorized"
    OPTIMAL_TOKEN_BASELINE = "optimal_token_baseline"
    TIR_OPTIMAL_TOKEN_BASELINE = "tir_optimal_token_baseline"
    GDPO = "gdpo"


def _name(name_or_enum: str | Enum) -> str:
    return name_or_enum.value if isinstance(name_or_enum, Enum) else name_or_enum


def register_adv_est(name_or_enum: str | AdvantageEstimator) -> Callable[[AdvEstimatorFn], AdvEstimatorFn]:
    """Decorator: register an advantage estimator under ``name_or_enum``.

    Registering a different function under a taken name raises ValueError (as verl); re-registering the same one
    is a no-op.
    """

    def decorator(fn: AdvEstimatorFn) -> AdvEstimatorFn:
        name = _name(name_or_enum)
        if name in ADV_ESTIMATOR_REGISTRY and ADV_ESTIMATOR_REGISTRY[name] is not fn:
            raise ValueError(f"advantage estimator {name!r} is already registered: {ADV_ESTIMATOR_REGISTRY[name]}")
        ADV_ESTIMATOR_REGISTRY[name] = fn
        return fn

    return decorator


def get_adv_estimator_fn(name_or_enum: str | AdvantageEstimator) -> AdvEstimatorFn:
    """The advantage estimator registered under ``name_or_enum``; ValueError listing the known names otherwise."""
    name = _name(name_or_enum)
    if name not in ADV_ESTIMATOR_REGISTRY:
        raise ValueError(f"Unknown advantage estimator {name!r}. Registered: {sorted(ADV_ESTIMATOR_REGISTRY)}")
    return ADV_ESTIMATOR_REGISTRY[name]


# --------------------------------------------------------------------------------------------------------------------
# Group statistics
# --------------------------------------------------------------------------------------------------------------------


def _group_ids(index: Sequence[Any] | np.ndarray | torch.Tensor, device: torch.device) -> tuple[torch.Tensor, int]:
    """Group ids (uids, any hashable) -> codes 0..G-1 in order of first appearance, shape (bs,); and G."""
    ids = index.tolist() if isinstance(index, np.ndarray | torch.Tensor) else list(index)
    codes: dict[Any, int] = {}
    group = [codes.setdefault(uid, len(codes)) for uid in ids]
    return torch.tensor(group, dtype=torch.long, device=device), len(codes)


def _group_stats(scores: torch.Tensor, index: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-response statistics of its group: (mean, unbiased std, size), each of shape (bs,).

    std = sqrt(sum (s - mean)^2 / (n - 1)) like ``torch.std``; for a group of one it is 0 here (callers decide).
    """
    group, n_groups = _group_ids(index, scores.device)
    if group.numel() != scores.numel():
        raise ValueError(f"index has {group.numel()} group ids for {scores.numel()} responses")
    zeros = torch.zeros(n_groups, dtype=scores.dtype, device=scores.device)
    size = zeros.index_add(0, group, torch.ones_like(scores))
    mean = zeros.index_add(0, group, scores) / size
    sq_dev = zeros.index_add(0, group, (scores - mean[group]) ** 2)
    std = torch.sqrt(sq_dev / (size - 1).clamp(min=1))
    return mean[group], std[group], size[group]


# --------------------------------------------------------------------------------------------------------------------
# Advantage estimators
# --------------------------------------------------------------------------------------------------------------------


@register_adv_est(AdvantageEstimator.GAE)
@torch.no_grad()
def compute_gae_advantage_return(
    token_level_rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized Advantage Estimation (Schulman et al. 2016, "High-Dimensional Continuous Control Using GAE").

        delta_t = r_t + gamma * V_{t+1} - V_t
        A_t     = delta_t + gamma * lam * A_{t+1}          (computed backwards over the response)
        R_t     = A_t + V_t                                (the critic's regression target)

    Padding is skipped: at a masked position the running ``V_{t+1}`` and ``A_{t+1}`` carry over unchanged, so a
    valid token sees the next *valid* token's value. The returned advantages are whitened over the batch (masked
    mean and unbiased variance, ``masked_whiten``).

    Shapes: token_level_rewards, values, response_mask (bs, response_length) -> advantages, returns (same).
    """
    mask = response_mask.to(values.dtype)
    next_value = torch.zeros_like(values[:, 0])
    last_gae = torch.zeros_like(values[:, 0])
    advantages = torch.zeros_like(values)
    for t in reversed(range(values.shape[-1])):
        delta = token_level_rewards[:, t] + gamma * next_value - values[:, t]
        gae_t = delta + gamma * lam * last_gae
        next_value = mask[:, t] * values[:, t] + (1 - mask[:, t]) * next_value
        last_gae = mask[:, t] * gae_t + (1 - mask[:, t]) * last_gae
        advantages[:, t] = last_gae
    returns = (advantages + values) * mask
    advantages = masked_whiten(advantages, mask) * mask
    return advantages, returns


@register_adv_est(AdvantageEstimator.GRPO)
@torch.no_grad()
def compute_grpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group Relative Policy Optimization, outcome supervision (Shao et al. 2024, "DeepSeekMath").

        s_i = sum_t r_{i,t}                                         (one score per response)
        A_i = (s_i - mean_g(s)) / (std_g(s) + epsilon)              (g = the responses sharing the prompt's uid)
        A_i = s_i - mean_g(s)                                       (norm_adv_by_std_in_grpo=False: Dr. GRPO,
                                                                     Liu et al. 2025, "Understanding R1-Zero-Like
                                                                     Training")

    std is the unbiased ``torch.std``; a group of a single response uses mean 0 and std 1 (as verl). A_i is
    broadcast over the response's tokens; returns equal advantages.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    adv = _grpo_scalars(token_level_rewards.sum(dim=-1), index, epsilon, norm_adv_by_std_in_grpo)
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


def _grpo_scalars(scores: torch.Tensor, index: Any, epsilon: float, norm_by_std: bool) -> torch.Tensor:
    """(s_i - mean_g) / (std_g + epsilon), or s_i - mean_g; a group of one uses mean 0 and std 1. (bs,) -> (bs,)."""
    mean, std, size = _group_stats(scores, index)
    mean = torch.where(size > 1, mean, torch.zeros_like(mean))
    std = torch.where(size > 1, std, torch.ones_like(std))
    return (scores - mean) / (std + epsilon) if norm_by_std else scores - mean


@register_adv_est(AdvantageEstimator.GRPO_VECTORIZED)
@torch.no_grad()
def compute_grpo_vectorized_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO under verl's name for its batched implementation (``algorithm.adv_estimator=grpo_vectorized``).

    The same formula as ``compute_grpo_outcome_advantage`` (which here is already computed for all groups at once
    with scatter-adds): A_i = (s_i - mean_g(s)) / (std_g(s) + epsilon), a group of one with mean 0 and std 1.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    adv = _grpo_scalars(token_level_rewards.sum(dim=-1), index, epsilon, norm_adv_by_std_in_grpo)
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est(AdvantageEstimator.GRPO_PASSK)
@torch.no_grad()
def compute_grpo_passk_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pass@k advantage in GRPO form (Chen et al. 2025, "Pass@k Training", arXiv 2503.19595; as in verl).

    Only the best response of each group learns; it gets the margin by which it beats the runner-up:

        A_best = (s_max - s_second) / (std_g(s) + epsilon)    (without "/ (std + epsilon)" when not normalising)
        A_i    = 0                                            for every other response

    ``config.norm_adv_by_std_in_grpo`` (the typed ``algorithm`` section), when a config is given, overrides the
    argument (verl reads the config).
    Every group needs at least two responses (ValueError otherwise). Ties give the best a zero advantage.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    config = typed_section(config, "algorithm", "compute_grpo_passk_outcome_advantage", optional=True)
    norm_by_std = config.norm_adv_by_std_in_grpo if config is not None else norm_adv_by_std_in_grpo
    scores = token_level_rewards.sum(dim=-1)
    group, n_groups = _group_ids(index, scores.device)
    adv = torch.zeros_like(scores)
    for g in range(n_groups):
        members = torch.nonzero(group == g).squeeze(-1)
        if members.numel() < 2:
            raise ValueError(f"grpo_passk needs at least 2 responses per group; group {g} has {members.numel()}")
        group_scores = scores[members]
        top2, top2_pos = torch.topk(group_scores, 2)
        margin = top2[0] - top2[1]
        if norm_by_std:
            margin = margin / (torch.std(group_scores) + epsilon)
        adv[members[top2_pos[0]]] = margin
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est(AdvantageEstimator.RLOO)
@torch.no_grad()
def compute_rloo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE Leave-One-Out (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization").

    The baseline of response i is the mean score of the *other* n - 1 responses of its group:

        A_i = s_i - (sum_g(s) - s_i) / (n - 1) = n / (n - 1) * (s_i - mean_g(s))

    A group of a single response keeps its raw score (as verl). ``epsilon`` is unused (verl's signature).

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    scores = token_level_rewards.sum(dim=-1)
    mean, _, n = _group_stats(scores, index)
    adv = torch.where(n > 1, n / (n - 1).clamp(min=1) * (scores - mean), scores)
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est(AdvantageEstimator.RLOO_VECTORIZED)
@torch.no_grad()
def compute_rloo_vectorized_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO in verl's batched form (``algorithm.adv_estimator=rloo_vectorized``):

        A_i = (n s_i - sum_g(s)) / (n - 1)        (= s_i minus the mean of the other n - 1 responses)

    The one difference from ``rloo``: a group of a single response has no other response to compare with and gets
    A = 0 here (``rloo`` keeps its raw score), as in verl. ``epsilon`` is unused (verl's signature).

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    scores = token_level_rewards.sum(dim=-1)
    mean, _, n = _group_stats(scores, index)
    adv = torch.where(n > 1, n / (n - 1).clamp(min=1) * (scores - mean), torch.zeros_like(scores))
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est(AdvantageEstimator.REINFORCE_PLUS_PLUS)
@torch.no_grad()
def compute_reinforce_plus_plus_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ (Hu 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning LLMs").

        G_t = r_t + gamma * G_{t'}                 (t' = the next response token after t: the discounted
                                                    return-to-go over response tokens only)
        A_t = whiten(G)_t                          (masked mean / unbiased variance over the whole batch)

    Masked positions inside a response (a multi-turn trajectory's tool / user observation tokens, mask 0) are
    skipped, as GAE skips them: the running return passes through them unchanged and undiscounted, so the outcome
    reward at the end reaches the earlier turns, and G is 0 there. Rewards placed on masked positions are ignored.

    ``gamma`` defaults to ``config.gamma`` (the typed ``algorithm`` section; verl reads it there): one of them is
    required.

    Shapes: token_level_rewards, response_mask (bs, response_length) -> advantages, returns (same).
    """
    config = typed_section(config, "algorithm", "compute_reinforce_plus_plus_outcome_advantage", optional=True)
    if gamma is None:
        if config is None:
            raise TypeError("compute_reinforce_plus_plus_outcome_advantage needs gamma or the algorithm config")
        gamma = config.gamma
    mask = response_mask.to(token_level_rewards.dtype)
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    for t in reversed(range(token_level_rewards.shape[-1])):
        candidate = token_level_rewards[:, t] + gamma * running
        returns[:, t] = candidate * mask[:, t]
        running = mask[:, t] * candidate + (1 - mask[:, t]) * running
    advantages = masked_whiten(returns, mask) * mask
    return advantages, returns


@register_adv_est(AdvantageEstimator.REINFORCE_PLUS_PLUS_BASELINE)
@torch.no_grad()
def compute_reinforce_plus_plus_baseline_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ with a group baseline (Hu 2025, "REINFORCE++", the "-baseline" variant; as in verl).

        A'_i  = s_i - mean_g(s)                    (group of one: mean 0)
        A_i,t = whiten(A' broadcast over tokens)   (masked mean / unbiased variance over the whole batch)

    ``epsilon`` is unused (verl's signature). Returns equal advantages.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    scores = token_level_rewards.sum(dim=-1)
    mean, _, size = _group_stats(scores, index)
    centred = scores - torch.where(size > 1, mean, torch.zeros_like(mean))
    mask = response_mask.to(scores.dtype)
    adv = centred.unsqueeze(-1) * mask
    adv = masked_whiten(adv, mask) * mask
    return adv, adv


@register_adv_est(AdvantageEstimator.REMAX)
@torch.no_grad()
def compute_remax_outcome_advantage(
    token_level_rewards: torch.Tensor,
    reward_baselines: torch.Tensor,
    response_mask: torch.Tensor,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMax (Li et al. 2023, "ReMax: A Simple, Effective, and Efficient RL Method for Aligning LLMs").

        G_t = sum_{s >= t} m_s * r_s               (undiscounted return-to-go)
        A_t = G_t - b                              (b = the score of the greedy response to the same prompt)

    Shapes: token_level_rewards, response_mask (bs, response_length); reward_baselines (bs,)
    -> advantages, returns (bs, response_length).
    """
    mask = response_mask.to(token_level_rewards.dtype)
    returns = (token_level_rewards * mask).flip(-1).cumsum(-1).flip(-1) * mask
    advantages = returns - reward_baselines.unsqueeze(-1) * mask
    return advantages, returns


@register_adv_est(AdvantageEstimator.OPO)
@torch.no_grad()
def compute_opo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """On-Policy RL with Optimal reward baseline (Hao et al. 2025, "OPO", arXiv 2505.23585; as in verl).

    The baseline is the length-weighted mean score of the group (the variance-minimising baseline when the
    gradient norm grows with length):

        b_g = sum_{j in g} |y_j| * s_j / sum_{j in g} |y_j|,     A_i = s_i - b_g     (group of one: b = 0)

    ``epsilon`` is unused (verl's signature). Returns equal advantages.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    scores = token_level_rewards.sum(dim=-1)
    lengths = response_mask.to(scores.dtype).sum(dim=-1)
    group, n_groups = _group_ids(index, scores.device)
    zeros = torch.zeros(n_groups, dtype=scores.dtype, device=scores.device)
    size = zeros.index_add(0, group, torch.ones_like(scores))[group]
    weighted = zeros.index_add(0, group, lengths * scores)[group]
    total_len = zeros.index_add(0, group, lengths)[group]
    baseline = torch.where(size > 1, weighted / total_len.clamp(min=1), torch.zeros_like(scores))
    adv = (scores - baseline).unsqueeze(-1) * response_mask
    return adv, adv


@register_adv_est(AdvantageEstimator.GPG)
@torch.no_grad()
def compute_gpg_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    f_norm: float = 1.0,
    alpha: float = 1.0,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group Policy Gradient advantage (Chu et al. 2025, "GPG: A Simple and Strong RL Baseline"; as in verl).

        alpha = bs / max(1, #{i : s_i != 0})       (re-weights batches where few responses score)
        A_i   = alpha * (s_i - mean_g(s)) / f_norm (group of one: mean 0)

    As in verl, ``alpha`` is always recomputed from the batch (the argument is ignored); ``epsilon`` is unused.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    scores = token_level_rewards.sum(dim=-1)
    alpha = scores.numel() / max(1, int(torch.count_nonzero(scores)))
    mean, _, size = _group_stats(scores, index)
    mean = torch.where(size > 1, mean, torch.zeros_like(mean))
    adv = (alpha * (scores - mean) / f_norm).unsqueeze(-1) * response_mask
    return adv, adv
