"""The advantage stage on a batch: token-level rewards (score / reward_temp, minus the KL penalty when it is in the
reward) and the registered estimator's advantages and returns (verl's ``compute_advantage`` and ``apply_kl_penalty``;
the math itself is in ``verl.core_algos``)."""

from __future__ import annotations

from typing import Any

import torch

from verl import core_algos
from verl.protocol import DataProto


def compute_advantage(
    data: DataProto,
    adv_estimator: str,
    gamma: float = 1.0,
    lam: float = 1.0,
    norm_adv_by_std_in_grpo: bool = True,
    config=None,
) -> DataProto:
    """Fill ``advantages`` and ``returns`` with the registered estimator ``adv_estimator``.

    Every estimator gets the same keyword arguments and takes what it needs: the batch's columns an estimator may
    read (``values`` for GAE, ``reward_baselines`` for ReMax, ``old_log_probs`` / ``sum_pi_squared`` /
    ``rollout_is_weights`` for the optimal token baseline; None when absent) and the whole ``batch`` and
    ``non_tensor_batch`` (GDPO reads its reward components there)."""
    fn = core_algos.get_adv_estimator_fn(adv_estimator)
    b = data.batch
    optional = ("values", "reward_baselines", "old_log_probs", "sum_pi_squared", "rollout_is_weights")
    advantages, returns = fn(
        token_level_rewards=b["token_level_rewards"],
        response_mask=b["response_mask"],
        index=data.non_tensor_batch["uid"],
        **{key: b[key] if key in b else None for key in optional},
        gamma=gamma,
        lam=lam,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
        config=config,
        batch=b,
        non_tensor_batch=data.non_tensor_batch,
    )
    data.batch["advantages"], data.batch["returns"] = advantages, returns
    return data


def apply_kl_penalty(
    data: DataProto, kl_ctrl, kl_penalty: str = "kl", reward_temp: float = 1.0
) -> tuple[DataProto, dict[str, float]]:
    """token_level_rewards = token_level_scores / reward_temp - beta * KL(old || ref), beta from the (fixed or
    adaptive) controller."""
    b = data.batch
    rewards, metrics = core_algos.apply_kl_penalty(
        b["token_level_scores"] / reward_temp,
        b["old_log_probs"],
        b["ref_log_prob"],
        b["response_mask"],
        kl_ctrl,
        kl_penalty,
    )
    data.batch["token_level_rewards"] = rewards
    return data, metrics


def compute_response_mask(data: DataProto) -> torch.Tensor:
    """(bs, R) 1 on each response's tokens (the response part of ``attention_mask``), as verl computes it for
    batches that do not carry ``response_mask``."""
    responses = data.batch["responses"]
    return data.batch["attention_mask"][:, -responses.shape[-1] :]


def compute_token_level_rewards(data: DataProto, algorithm: Any, kl_ctrl: Any = None) -> tuple[DataProto, dict]:
    """token_level_rewards = token_level_scores / algorithm.reward_temp, minus the KL penalty when it is in the
    reward (``algorithm.use_kl_in_reward``, coefficient from ``kl_ctrl``); returns the KL metrics too.
    ``token_level_scores`` (and the ``critic/score/*`` metrics) stay the raw scores."""
    if algorithm.use_kl_in_reward:
        return apply_kl_penalty(data, kl_ctrl, algorithm.kl_penalty, algorithm.reward_temp)
    data.batch["token_level_rewards"] = data.batch["token_level_scores"] / algorithm.reward_temp
    return data, {}
