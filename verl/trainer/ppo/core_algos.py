"""The algorithm core of PPO-family post-training: advantage estimators, policy / value / entropy losses, KL penalties
and controllers, loss aggregation.

Everything here is a pure function of tensors (plus plain numbers and an optional dict-like config: a ``dict``, an
omegaconf ``DictConfig`` or any object with attributes). No workers, no models, no global state besides the two
registries. Shapes: ``bs`` is the number of responses in the batch, ``response_length`` the padded length of the
response part; every ``(bs, response_length)`` tensor is aligned with ``response_mask`` (1 on real response tokens,
0 on padding).

Advantage estimators
--------------------
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

Policy losses
-------------
Registered under ``actor.policy_loss.loss_mode`` and called as::

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

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np
import torch

from verl.utils.torch_functional import entropy_from_logits, masked_mean, masked_sum, masked_var, masked_whiten

__all__ = [
    "AdaptiveKLController",
    "AdvantageEstimator",
    "FixedKLController",
    "agg_loss",
    "apply_kl_penalty",
    "compute_entropy_loss",
    "compute_gae_advantage_return",
    "compute_gpg_outcome_advantage",
    "compute_grpo_outcome_advantage",
    "compute_grpo_passk_outcome_advantage",
    "compute_opo_outcome_advantage",
    "compute_overlong_penalty",
    "compute_policy_loss",
    "compute_policy_loss_cispo",
    "compute_policy_loss_clip_cov",
    "compute_policy_loss_gpg",
    "compute_policy_loss_gspo",
    "compute_policy_loss_kl_cov",
    "compute_policy_loss_vanilla",
    "compute_reinforce_plus_plus_baseline_outcome_advantage",
    "compute_reinforce_plus_plus_outcome_advantage",
    "compute_remax_outcome_advantage",
    "compute_rloo_outcome_advantage",
    "compute_value_loss",
    "entropy_from_logits",
    "get_adv_estimator_fn",
    "get_kl_controller",
    "get_policy_loss_fn",
    "kl_penalty",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "register_adv_est",
    "register_policy_loss",
]

# --------------------------------------------------------------------------------------------------------------------
# Registries
# --------------------------------------------------------------------------------------------------------------------

PolicyLossFn = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]
AdvEstimatorFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]

POLICY_LOSS_REGISTRY: dict[str, PolicyLossFn] = {}
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


# --------------------------------------------------------------------------------------------------------------------
# Small shared helpers
# --------------------------------------------------------------------------------------------------------------------


def _cfg_get(config: Any, key: str, default: Any = None) -> Any:
    """``config[key]`` for a dict / DictConfig / attribute object; ``default`` when absent or None."""
    if config is None:
        return default
    value = config.get(key, None) if hasattr(config, "get") else getattr(config, key, None)
    return default if value is None else value


def _policy_loss_option(config: Any, key: str, default: Any) -> Any:
    """A per-loss option: ``config.policy_loss.<key>`` (verl's layout), else ``config.<key>``, else ``default``."""
    return _cfg_get(_cfg_get(config, "policy_loss"), key, _cfg_get(config, key, default))


def _clip_ranges(config: Any) -> tuple[float, float]:
    """(eps_low, eps_high): ``clip_ratio_low`` / ``clip_ratio_high``, each defaulting to ``clip_ratio`` (0.2)."""
    clip_ratio = _cfg_get(config, "clip_ratio", 0.2)
    return _cfg_get(config, "clip_ratio_low", clip_ratio), _cfg_get(config, "clip_ratio_high", clip_ratio)


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
    scores = token_level_rewards.sum(dim=-1)
    mean, std, size = _group_stats(scores, index)
    mean = torch.where(size > 1, mean, torch.zeros_like(mean))
    std = torch.where(size > 1, std, torch.ones_like(std))
    adv = (scores - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else scores - mean
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

    ``config.norm_adv_by_std_in_grpo``, when the config has it, overrides the argument (verl reads the config).
    Every group needs at least two responses (ValueError otherwise). Ties give the best a zero advantage.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    norm_by_std = _cfg_get(config, "norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
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

        G_t = r_t + gamma * m_{t+1} * G_{t+1}      (discounted return-to-go; it does not flow back across padding)
        A_t = whiten(G)_t                          (masked mean / unbiased variance over the whole batch)

    ``gamma`` defaults to ``config.gamma`` (verl reads it from the algorithm config), then 1.0.

    Shapes: token_level_rewards, response_mask (bs, response_length) -> advantages, returns (same).
    """
    if gamma is None:
        gamma = _cfg_get(config, "gamma", 1.0)
    mask = response_mask.to(token_level_rewards.dtype)
    returns = torch.zeros_like(token_level_rewards)
    running = torch.zeros_like(token_level_rewards[:, 0])
    for t in reversed(range(token_level_rewards.shape[-1])):
        running = token_level_rewards[:, t] + gamma * running
        returns[:, t] = running
        running = running * mask[:, t]
    returns = returns * mask
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


# --------------------------------------------------------------------------------------------------------------------
# KL: estimators, controllers, reward penalty
# --------------------------------------------------------------------------------------------------------------------

KL_PENALTY_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


def _kl_estimate(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind == "abs":
        return (logprob - ref_logprob).abs()
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kind in ("low_var_kl", "k3"):
        log_ratio = torch.clamp(ref_logprob - logprob, min=-20.0, max=20.0)
        return torch.clamp(torch.exp(log_ratio) - log_ratio - 1, min=-10.0, max=10.0)
    if kind == "full":
        raise NotImplementedError(
            "kl_penalty='full' needs the whole vocabulary distribution of both policies, not the log-probs of the "
            f"sampled tokens; use one of {KL_PENALTY_TYPES}"
        )
    raise ValueError(f"Unknown kl_penalty {kind!r}. Choose one of {KL_PENALTY_TYPES} (or with a '+' suffix)")


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from the sampled tokens' log-probs (Schulman 2020, "Approximating KL
    Divergence", http://joschu.net/blog/kl-approx.html). With log r = ref_logprob - logprob:

        "kl"  / "k1":          -log r = logprob - ref_logprob              (unbiased, high variance)
        "abs":                 |logprob - ref_logprob|
        "mse" / "k2":          0.5 * (logprob - ref_logprob)^2             (biased, low variance)
        "low_var_kl" / "k3":   r - log r - 1                               (unbiased, >= 0; log r clamped to
                                                                            [-20, 20], result to [-10, 10] as verl)

    A "+" suffix (e.g. "k3+") keeps the estimator's value but takes the gradient of k2, whose expected gradient is
    the true KL gradient (straight-through: k2 - sg(k2) + sg(value)). "full" raises NotImplementedError.

    Shapes: logprob, ref_logprob (bs, response_length) -> (bs, response_length).
    """
    return _kl_penalty(logprob, ref_logprob, kl_penalty)


def _kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, name: str) -> torch.Tensor:
    kind = name[:-1] if name.endswith("+") else name
    value = _kl_estimate(logprob, ref_logprob, kind)
    if not name.endswith("+") or kind in ("mse", "k2"):
        return value
    k2 = 0.5 * (logprob - ref_logprob).square()
    return k2 - k2.detach() + value.detach()


class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences").

        e    = clip(KL_current / KL_target - 1, -0.2, 0.2)
        beta <- beta * (1 + e * n_steps / horizon)

    Selected by ``algorithm.kl_ctrl.type=adaptive``; ``value`` is the current beta.
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        self.value = float(init_kl_coef)
        self.target = float(target_kl)
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        proportional_error = float(np.clip(current_kl / self.target - 1.0, -0.2, 0.2))
        self.value *= 1.0 + proportional_error * n_steps / self.horizon


class FixedKLController:
    """Constant KL coefficient; ``update`` is a no-op."""

    def __init__(self, kl_coef: float) -> None:
        self.value = float(kl_coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        pass


def get_kl_controller(kl_ctrl: Any) -> FixedKLController | AdaptiveKLController:
    """Build the controller from ``algorithm.kl_ctrl``: ``type`` (fixed | adaptive), ``kl_coef``, ``target_kl``,
    ``horizon`` (dict, DictConfig or attribute object)."""
    kind = _cfg_get(kl_ctrl, "type", "fixed")
    kl_coef = _cfg_get(kl_ctrl, "kl_coef", 0.001)
    if kind == "fixed":
        return FixedKLController(kl_coef=kl_coef)
    if kind == "adaptive":
        horizon = _cfg_get(kl_ctrl, "horizon", 10000)
        if horizon <= 0:
            raise ValueError(f"kl_ctrl.horizon must be > 0 for the adaptive controller, got {horizon}")
        return AdaptiveKLController(
            init_kl_coef=kl_coef, target_kl=_cfg_get(kl_ctrl, "target_kl", 0.1), horizon=horizon
        )
    raise ValueError(f"Unknown kl_ctrl.type {kind!r}; choose 'fixed' or 'adaptive'")


def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    old_log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_ctrl: FixedKLController | AdaptiveKLController,
    kl_penalty: str = "kl",
) -> tuple[torch.Tensor, dict[str, float]]:
    """KL-shaped rewards (Ziegler et al. 2019; Ouyang et al. 2022, "InstructGPT"):

        r_t = score_t - beta * m_t * KL_t          (KL_t from ``kl_penalty``, beta = kl_ctrl.value)

    Then the controller is updated with the batch's mean per-sequence KL, mean_i(masked_mean_t(KL_{i,t})), and
    n_steps = bs (as verl). Metrics: ``actor/reward_kl_penalty`` (that mean KL) and ``actor/reward_kl_penalty_coeff``
    (the beta that was applied).

    Shapes: token_level_scores, old_log_prob, ref_log_prob, response_mask (bs, response_length)
    -> token_level_rewards (bs, response_length), metrics.
    """
    mask = response_mask.to(token_level_scores.dtype)
    kld = _kl_penalty(old_log_prob, ref_log_prob, kl_penalty) * mask
    beta = kl_ctrl.value
    token_level_rewards = token_level_scores - beta * kld
    current_kl = masked_mean(kld, mask, dim=-1).mean().item()
    kl_ctrl.update(current_kl=current_kl, n_steps=token_level_scores.shape[0])
    return token_level_rewards, {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}


# --------------------------------------------------------------------------------------------------------------------
# Loss aggregation
# --------------------------------------------------------------------------------------------------------------------

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str) -> torch.Tensor:
    """Reduce a per-token loss to a scalar. With m the mask, L = response_length, S = sequences holding a token:

        "token-mean":               sum_{i,t} m l / sum_{i,t} m              (every token weighs the same)
        "seq-mean-token-sum":       mean_{i in S} sum_t m l                  (Dr. GRPO-style sums per sequence)
        "seq-mean-token-mean":      mean_{i in S} (sum_t m l / sum_t m)      (every sequence weighs the same)
        "seq-mean-token-sum-norm":  sum_{i,t} m l / L                        (constant normaliser, as verl)

    Sequences without a single response token (e.g. padding rows) are left out of the seq-means.

    Shapes: loss_mat, loss_mask (bs, response_length) -> scalar.
    """
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    seq_sum = masked_sum(loss_mat, loss_mask, dim=-1)
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return seq_sum.sum() / loss_mask.shape[-1]
    n_tokens = loss_mask.to(loss_mat.dtype).sum(dim=-1)
    has_tokens = n_tokens > 0
    if loss_agg_mode == "seq-mean-token-sum":
        return masked_mean(seq_sum, has_tokens)
    if loss_agg_mode == "seq-mean-token-mean":
        return masked_mean(seq_sum / n_tokens.clamp(min=1), has_tokens)
    raise ValueError(f"Invalid loss_agg_mode {loss_agg_mode!r}; choose one of {LOSS_AGG_MODES}")


def loss_normalizer_counts(loss_mask: torch.Tensor) -> torch.Tensor:
    """``[tokens, sequences holding a token, rows]`` of a mini-batch's ``loss_mask`` (bs, L), float64 (3,): the
    denominators of `agg_loss`, summed over data-parallel ranks by the worker before `micro_batch_loss_weight`."""
    tokens = loss_mask.to(torch.float64).sum(-1)
    rows = torch.tensor(float(len(loss_mask)), dtype=torch.float64, device=loss_mask.device)
    return torch.stack([tokens.sum(), (tokens > 0).sum().to(torch.float64), rows])


def micro_batch_loss_weight(
    micro_mask: torch.Tensor, mini_counts: torch.Tensor, loss_agg_mode: str, dp_size: int = 1
) -> float:
    """Weight w of one micro-batch's aggregated loss so that sum over micro-batches and the data-parallel gradient
    average give the loss `agg_loss` would compute on the whole mini-batch at once:

        token-mean:                  w = dp * tokens(micro) / tokens(mini)
        seq-mean-token-sum / -mean:  w = dp * seqs(micro) / seqs(mini)      (sequences holding a token)
        seq-mean-token-sum-norm:     w = dp                                 (its normaliser L is a constant)

    ``mini_counts`` is `loss_normalizer_counts` of the whole mini-batch over all ranks; ``dp * (...)`` undoes the
    average FSDP takes over ranks. So micro-batch size and worker count never change the gradient.
    """
    slot = {"token-mean": 0, "seq-mean-token-sum": 1, "seq-mean-token-mean": 1, "seq-mean-token-sum-norm": None}
    if loss_agg_mode not in slot:
        raise ValueError(f"Invalid loss_agg_mode {loss_agg_mode!r}; choose one of {LOSS_AGG_MODES}")
    i = slot[loss_agg_mode]
    if i is None:
        return float(dp_size)
    own = loss_normalizer_counts(micro_mask)
    return float(dp_size * own[i].item() / max(mini_counts[i].item(), 1.0))


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


# --------------------------------------------------------------------------------------------------------------------
# Value and entropy losses
# --------------------------------------------------------------------------------------------------------------------


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss (Schulman et al. 2017, PPO; the clipping as in OpenAI baselines' ppo2):

        v_clip = clip(v, v_old - c, v_old + c)
        loss   = 0.5 * agg( max((v - R)^2, (v_clip - R)^2) )

    vf_clipfrac = fraction of tokens where the clipped error is the larger one.

    Shapes: vpreds (new values), returns, values (old values), response_mask (bs, response_length)
    -> (vf_loss, vf_clipfrac), scalars.
    """
    vpred_clipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    loss_unclipped = (vpreds - returns) ** 2
    loss_clipped = (vpred_clipped - returns) ** 2
    vf_loss = 0.5 * agg_loss(torch.maximum(loss_unclipped, loss_clipped), response_mask, loss_agg_mode)
    vf_clipfrac = masked_mean((loss_clipped > loss_unclipped).to(vpreds.dtype), response_mask)
    return vf_loss, vf_clipfrac


def compute_entropy_loss(
    logits: torch.Tensor, response_mask: torch.Tensor, loss_agg_mode: str = "token-mean"
) -> torch.Tensor:
    """Aggregated token entropy H_t = logsumexp(z_t) - sum_v softmax(z_t)_v z_{t,v} (``entropy_from_logits``).

    Shapes: logits (bs, response_length, vocab_size), response_mask (bs, response_length) -> scalar.
    """
    return agg_loss(entropy_from_logits(logits), response_mask, loss_agg_mode)


# --------------------------------------------------------------------------------------------------------------------
# DAPO helpers
# --------------------------------------------------------------------------------------------------------------------


def compute_overlong_penalty(
    response_length_tensor: torch.Tensor,
    max_response_length: int,
    overlong_buffer_len: int,
    penalty_factor: float,
) -> torch.Tensor:
    """Soft overlong punishment (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale").

    With L_max = max_response_length, B = overlong_buffer_len and |y| the response length:

        penalty = 0                                   |y| <= L_max - B
                = -(|y| - (L_max - B)) / B * factor   L_max - B < |y|   (reaches -factor at |y| = L_max)

    The penalty is added to the response's score. Shapes: response_length_tensor (bs,) -> (bs,) float.
    """
    if overlong_buffer_len <= 0:
        raise ValueError(f"overlong_buffer_len must be > 0, got {overlong_buffer_len}")
    dtype = response_length_tensor.dtype if response_length_tensor.is_floating_point() else torch.get_default_dtype()
    lengths = response_length_tensor.to(dtype)
    exceed = lengths - (max_response_length - overlong_buffer_len)
    return torch.clamp(-exceed / overlong_buffer_len * penalty_factor, max=0.0)
