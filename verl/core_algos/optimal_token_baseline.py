"""The optimal token baseline (OTB): a baseline per token position instead of one per response, weighted by how much
gradient variance the trajectory has accumulated up to that token.

Registered as ``optimal_token_baseline`` (positions are token indices: single-turn responses) and
``tir_optimal_token_baseline`` (positions count response tokens only, skipping masked observation spans:
multi-turn, tool-integrated responses). Both need, per response token, the sampling policy's log-prob
(``old_log_probs``) and the sum over the vocabulary of its squared probabilities (``sum_pi_squared``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .advantage import AdvantageEstimator, _group_ids, register_adv_est

__all__ = ["compute_multi_turn_optimal_token_baseline_advantage", "compute_optimal_token_baseline_advantage"]


def _energy_and_returns(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    old_log_probs: torch.Tensor | None,
    sum_pi_squared: torch.Tensor | None,
    rollout_is_weights: torch.Tensor | None,
    name: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mask, returns-to-go G, cumulative energy W), each (bs, response_length), in the rewards' dtype."""
    if old_log_probs is None or sum_pi_squared is None:
        raise ValueError(
            f"adv_estimator={name} needs, per response token, old_log_probs and sum_pi_squared (sum over the "
            "vocabulary of the policy's squared probabilities) in the batch; the actor's log-prob pass must emit "
            "sum_pi_squared (verl: actor.calculate_sum_pi_squared=True)"
        )
    dtype = token_level_rewards.dtype
    mask = response_mask.to(dtype)
    returns = (token_level_rewards * mask).flip(-1).cumsum(-1).flip(-1)
    energy = 1 - 2 * torch.exp(old_log_probs.to(dtype)) + sum_pi_squared.to(dtype)
    if rollout_is_weights is not None:
        energy = energy * rollout_is_weights.to(dtype) ** 2
    return mask, returns, (energy * mask).cumsum(-1)


def _group_baselines(
    returns: torch.Tensor, energy: torch.Tensor, valid: torch.Tensor, index: Any, handle_zero_tail: bool, eps: float
) -> torch.Tensor:
    """B_t = sum_{i in g} G_{i,t} W_{i,t} v_{i,t} / (sum_{i in g} W_{i,t} v_{i,t} + eps) per group g and position t;
    0 for a group of one response (and for rows with ``index`` None: excluded). With ``handle_zero_tail`` the
    positions where only the group's single longest response remains (from the second-longest length on) get
    B = 0: there the group offers no other response to compare with. Shapes: (bs, P) -> (bs, P)."""
    kept = [i for i, uid in enumerate(np.asarray(index, dtype=object).tolist()) if uid is not None]
    baselines = torch.zeros_like(returns)
    if not kept:
        return baselines
    rows = torch.tensor(kept, dtype=torch.long, device=returns.device)
    group, n_groups = _group_ids([index[i] for i in kept], returns.device)
    zeros = returns.new_zeros(n_groups, returns.shape[-1])
    num = zeros.index_add(0, group, (returns * energy * valid)[rows])
    den = zeros.index_add(0, group, (energy * valid)[rows])
    size = torch.zeros(n_groups, dtype=torch.long, device=returns.device).index_add(0, group, torch.ones_like(group))
    per_row = num[group] / (den[group] + eps)
    baselines[rows] = torch.where((size[group] > 1).unsqueeze(-1), per_row, torch.zeros_like(per_row))
    if handle_zero_tail:
        lengths = valid[rows].sum(-1)
        for g in range(n_groups):
            members = torch.nonzero(group == g).squeeze(-1)
            if members.numel() < 2:
                continue
            ordered = torch.sort(lengths[members]).values
            longest, second = int(ordered[-1]), int(ordered[-2])
            if longest > second:  # a unique longest response
                row = rows[members[torch.argmax(lengths[members])]]
                baselines[row, second:] = 0.0
    return baselines


@register_adv_est(AdvantageEstimator.OPTIMAL_TOKEN_BASELINE)
@torch.no_grad()
def compute_optimal_token_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    old_log_probs: torch.Tensor | None = None,
    sum_pi_squared: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Optimal Token Baseline (arXiv 2602.07078; verl's ``optimal_token_baseline``).

    The variance-minimising baseline of a policy gradient weighs each sample's return by its squared gradient
    norm. For a softmax policy, ||grad_z log pi(a_j)||^2 = 1 - 2 pi_j + sum_v pi_v^2 (the logit-gradient proxy,
    forward only), and a trajectory's gradient up to token t accumulates these:

        G_t = sum_{s >= t} m_s r_s                                  (undiscounted return-to-go)
        W_t = sum_{j <= t} m_j (1 - 2 pi_j + sum_v pi_{j,v}^2)      ("realized energy"; times rho_j^2 with
                                                                     rollout_is_weights rho)
        B_t = sum_{i in g} G_{i,t} W_{i,t} m_{i,t} / (sum_{i in g} W_{i,t} m_{i,t} + epsilon)
        A_t = (G_t - B_t) m_t

    g = the responses sharing the prompt's uid (a group of one: B = 0, A = G). ``handle_zero_tail``: see
    ``_group_baselines``. pi_j = exp(old_log_probs_j).

    Shapes: token_level_rewards, response_mask, old_log_probs, sum_pi_squared, rollout_is_weights
    (bs, response_length); index (bs,) -> advantages, returns (bs, response_length), 0 outside the mask.
    """
    mask, returns, energy = _energy_and_returns(
        token_level_rewards, response_mask, old_log_probs, sum_pi_squared, rollout_is_weights, "optimal_token_baseline"
    )
    baselines = _group_baselines(returns, energy, mask, index, handle_zero_tail, epsilon)
    return (returns - baselines) * mask, returns * mask


@register_adv_est(AdvantageEstimator.TIR_OPTIMAL_TOKEN_BASELINE)
@torch.no_grad()
def compute_multi_turn_optimal_token_baseline_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    old_log_probs: torch.Tensor | None = None,
    sum_pi_squared: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The optimal token baseline for multi-turn (tool-integrated) responses (verl's ``tir_optimal_token_baseline``).

    The formulas of ``compute_optimal_token_baseline_advantage``, with one change: responses are compared at their
    k-th *response* token rather than at position t. A multi-turn response interleaves masked observation spans of
    different lengths, so the same position holds unrelated steps in different responses; counting only m = 1
    tokens lines the policy's own steps up. Each response's G and W are compacted to its response tokens, B_k is
    computed over the group per step k, and A is written back to the original positions. Responses without a
    response token are left out of their group.

    Shapes: as ``compute_optimal_token_baseline_advantage``.
    """
    mask, returns, energy = _energy_and_returns(
        token_level_rewards,
        response_mask,
        old_log_probs,
        sum_pi_squared,
        rollout_is_weights,
        "tir_optimal_token_baseline",
    )
    valid = mask > 0
    lengths = valid.sum(-1)
    width = int(lengths.max()) if lengths.numel() else 0
    steps = torch.arange(width, device=mask.device).expand(len(mask), width)
    compact_valid = steps < lengths.unsqueeze(-1)  # step k of row i holds its k-th response token
    compact_returns = returns.new_zeros(len(mask), width)
    compact_energy = returns.new_zeros(len(mask), width)
    compact_returns[compact_valid] = returns[valid]  # row-major order keeps each row's tokens in order
    compact_energy[compact_valid] = energy[valid]
    members = [uid if n > 0 else None for uid, n in zip(np.asarray(index, dtype=object).tolist(), lengths.tolist())]
    baselines = _group_baselines(
        compact_returns, compact_energy, compact_valid.to(mask.dtype), members, handle_zero_tail, epsilon
    )
    advantages = torch.zeros_like(returns)
    advantages[valid] = (compact_returns - baselines)[compact_valid]
    return advantages, returns * mask
