"""verl.core_algos.advantage: REINFORCE++ over multi-turn responses (masked observation spans inside a response),
and the batched GRPO / RLOO estimators under verl's names, against float64 loops."""

import numpy as np
import pytest
import torch
from algo_refs import (
    BS,
    LENGTHS,
    UIDS,
    T,
    algorithm,
    broadcast,
    close,
    mask,
    randn,
    ref_groups,
    ref_grpo_scalars,
    ref_whiten,
)

from verl import core_algos as ca


def _multi_turn_mask() -> torch.Tensor:
    m = mask()
    m[0, 2] = m[0, 3] = 0.0  # a tool observation between two assistant turns
    m[4, 1] = 0.0
    m[5, 4] = 0.0
    return m


def ref_reinforce_pp_returns(rewards, m, gamma):
    """G_t = r_t + gamma * G_(next response token), walking the response tokens only; 0 elsewhere."""
    returns = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        running = 0.0
        for t in reversed([t for t in range(T) if m[i, t]]):
            running = float(rewards[i, t]) + gamma * running
            returns[i][t] = running
    return returns


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_plus_plus_carries_the_return_across_observation_spans(gamma):
    m = _multi_turn_mask()
    rewards = randn(BS, T, seed=11) * m
    adv, ret = ca.compute_reinforce_plus_plus_outcome_advantage(rewards, m, config=algorithm(gamma=gamma))
    expected = ref_reinforce_pp_returns(rewards, m, gamma)
    close(ret, expected)
    close(adv, ref_whiten(expected, m))


def test_reinforce_plus_plus_outcome_reward_reaches_the_first_turn():
    # 2 assistant tokens, 2 observation tokens, 1 assistant token holding the outcome reward 2
    m = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0, 0.0]])
    r = torch.tensor([[0.0, 0.0, 0.0, 0.0, 2.0, 0.0]])
    _, ret = ca.compute_reinforce_plus_plus_outcome_advantage(r, m, config=algorithm(gamma=0.5))
    # observations are skipped, not discounted: 0.5 * 2 and 0.5^2 * 2 on the first turn; 0 off the response
    assert ret.tolist() == [[0.5, 1.0, 0.0, 0.0, 2.0, 0.0]]


def test_estimator_names_are_verls():
    names = {e.value for e in ca.AdvantageEstimator}
    assert {"rloo_vectorized", "grpo_vectorized", "optimal_token_baseline", "tir_optimal_token_baseline"} <= names
    assert "gdpo" in names


@pytest.mark.parametrize("norm", [True, False])
def test_grpo_vectorized_matches_loop(norm):
    m = mask()
    rewards = randn(BS, T, seed=8) * m
    index = np.array(UIDS[:-1] + ["solo"], dtype=object)  # a group of one: mean 0, std 1
    scores = [float(rewards[i].sum()) for i in range(BS)]
    adv, ret = ca.compute_grpo_vectorized_outcome_advantage(rewards, m, index, norm_adv_by_std_in_grpo=norm)
    expected = broadcast(ref_grpo_scalars(scores, index, 1e-6, norm), m)
    close(adv, expected)
    close(ret, expected)


def test_grpo_vectorized_resolves_nearly_equal_scores_in_float32():
    rewards = torch.tensor([[1.0], [1.00001], [2.0], [2.00001]])
    index = np.array(["p", "p", "q", "q"], dtype=object)
    adv, _ = ca.compute_grpo_vectorized_outcome_advantage(rewards, torch.ones_like(rewards), index)
    # the group std (~7e-6) is the size of epsilon: a one-pass variance in float32 would lose it entirely
    expected = ref_grpo_scalars([float(v) for v in rewards.double().squeeze(-1)], index)
    close(adv.double().squeeze(-1), expected, tol=1e-3)


def test_rloo_vectorized_matches_loop():
    m = mask()
    rewards = randn(BS, T, seed=9) * m
    index = np.array(UIDS[:-1] + ["solo"], dtype=object)
    scores = [float(rewards[i].sum()) for i in range(BS)]
    expected = [0.0] * BS
    for members in ref_groups(index).values():
        for j in members:  # leave-one-out baseline; a response alone has none and gets 0
            others = [scores[k] for k in members if k != j]
            expected[j] = scores[j] - sum(others) / len(others) if others else 0.0
    adv, ret = ca.compute_rloo_vectorized_outcome_advantage(rewards, m, index)
    close(adv, broadcast(expected, m))
    close(ret, adv)
    assert LENGTHS[-1] > 0 and (adv[-1] == 0).all()
