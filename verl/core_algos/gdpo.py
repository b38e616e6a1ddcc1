"""GDPO: one advantage from several reward components, each normalised within its group before they are summed.

Registered as ``algorithm.adv_estimator=gdpo``. The trainer passes the batch's non-tensor columns
(``non_tensor_batch``), where the reward function's extra fields land (one column per key of the dict it returns).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ._config import typed_section
from .advantage import AdvantageEstimator, _grpo_scalars, register_adv_est
from .functional import masked_whiten

__all__ = ["compute_gdpo_outcome_advantage"]


def _component_scores(
    keys: list[str], non_tensor_batch: Mapping[str, Any] | None, like: torch.Tensor
) -> list[torch.Tensor]:
    """One (bs,) score tensor per reward key, read from the non-tensor columns; clear errors for what is missing."""
    if non_tensor_batch is None:
        raise ValueError(
            "gdpo with algorithm.gdpo_reward_keys reads each component from the batch's non-tensor columns; pass "
            "non_tensor_batch= (the trainer does)"
        )
    scores = []
    for key in keys:
        if key not in non_tensor_batch:
            raise KeyError(
                f"gdpo reward key {key!r} is not a column of the batch (columns: {sorted(non_tensor_batch)}). The "
                "reward function must return a dict holding it, e.g. {'score': ..., "
                f"{key!r}: ...}}"
            )
        values = np.asarray(non_tensor_batch[key], dtype=np.float64)
        scores.append(torch.as_tensor(values, dtype=like.dtype, device=like.device))
    return scores


@register_adv_est(AdvantageEstimator.GDPO)
@torch.no_grad()
def compute_gdpo_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    non_tensor_batch: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group reward-Decoupled Normalization Policy Optimization ("GDPO", arXiv 2601.05242).

    Summing the reward components before GRPO's group normalisation lets the component with the largest spread
    drown the others. GDPO normalises each component k within each group first, then sums and whitens:

        A_{k,i} = (s_{k,i} - mean_g(s_k)) / (std_g(s_k) + epsilon)    (GRPO per component; without the division
                                                                      when norm_adv_by_std_in_grpo is False)
        A_i     = sum_k w_k A_{k,i}                                    (w: gdpo_reward_weights, default all 1)
        A_{i,t} = whiten(A broadcast over response tokens)              (masked mean / unbiased variance, batch)

    The components are the columns ``config.gdpo_reward_keys`` of ``non_tensor_batch`` (one number per response);
    ``config`` is the typed ``algorithm`` section. Without ``config`` and ``non_tensor_batch`` the single component
    is the response's total reward (sum_t r_t): then GDPO is whitened GRPO. With both given the keys are required,
    as in verl.

    Shapes: token_level_rewards, response_mask (bs, response_length); index (bs,) -> (bs, response_length) x 2.
    """
    config = typed_section(config, "algorithm", "compute_gdpo_outcome_advantage", optional=True)
    keys = list(config.gdpo_reward_keys or []) if config is not None else []
    if not keys and config is not None and non_tensor_batch is not None:
        raise ValueError(
            "adv_estimator=gdpo needs algorithm.gdpo_reward_keys: the reward components to normalise separately, "
            "keys of the dict the reward function returns (e.g. ['format_reward', 'accuracy_reward'])"
        )
    scores = token_level_rewards.sum(dim=-1)
    components = _component_scores(keys, non_tensor_batch, scores) if keys else [scores]
    given = config.gdpo_reward_weights if config is not None else None
    weights = list(given) if given else [1.0] * len(components)  # null: every component weighs 1
    if len(weights) != len(components):
        raise ValueError(
            f"algorithm.gdpo_reward_weights has {len(weights)} weights for {len(components)} gdpo_reward_keys; give "
            "one weight per key (or none: all 1)"
        )
    total = torch.zeros_like(scores)
    for weight, component in zip(weights, components):
        total = total + float(weight) * _grpo_scalars(component, index, epsilon, norm_adv_by_std_in_grpo)
    mask = response_mask.to(scores.dtype)
    adv = masked_whiten(total.unsqueeze(-1) * mask, mask) * mask
    return adv, adv
