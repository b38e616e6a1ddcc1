"""verl.core_algos.optimal_token_baseline: the per-token baseline B_t = sum G W / sum W over a prompt's group, for
single-turn positions and for multi-turn response-token steps, against float64 loops."""

import math

import numpy as np
import pytest
import torch
from algo_refs import BS, UIDS, T, close, mask, randn

from verl.core_algos import (
    compute_multi_turn_optimal_token_baseline_advantage,
    compute_optimal_token_baseline_advantage,
    get_adv_estimator_fn,
)

INDEX = np.array(UIDS[:-1] + ["solo"], dtype=object)  # groups of 3, 3, 1 (c minus its last member) and 1
LONG = [7, 5, 3, 1, 6, 4, 2, 4]  # group a (rows 0, 2, 5) has a unique longest response


def _inputs(m, seed=20):
    old = -randn(BS, T, seed=seed).abs() - 0.05
    spsq = torch.exp(2 * old) + 0.1 * torch.rand(BS, T, generator=torch.Generator().manual_seed(seed), dtype=old.dtype)
    return randn(BS, T, seed=seed + 1) * m, old, spsq


def _ref_baselines(G, W, lengths, index, zero_tail, eps=1e-8):
    """B[i][k] over step k (a position, or the k-th response token): sum_{j in g, k < n_j} G W / (sum W + eps)."""
    width = len(G[0]) if G else 0
    B = [[0.0] * width for _ in G]
    groups: dict = {}
    for i, uid in enumerate(index):
        if lengths[i] > 0:
            groups.setdefault(uid, []).append(i)
    for members in groups.values():
        if len(members) < 2:
            continue
        for k in range(width):
            live = [j for j in members if k < lengths[j]]
            num = sum(G[j][k] * W[j][k] for j in live)
            den = sum(W[j][k] for j in live) + eps
            for j in members:
                B[j][k] = num / den
        ordered = sorted(lengths[j] for j in members)
        if zero_tail and ordered[-1] > ordered[-2]:
            longest = max(members, key=lambda j: lengths[j])
            for k in range(ordered[-2], width):
                B[longest][k] = 0.0
    return B


def _ref_energy_returns(r, old, spsq, m, is_weights=None):
    G = [[sum(float(r[i, s]) * float(m[i, s]) for s in range(t, T)) for t in range(T)] for i in range(BS)]
    W = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        acc = 0.0
        for t in range(T):
            w = 1 - 2 * math.exp(float(old[i, t])) + float(spsq[i, t])
            if is_weights is not None:
                w *= float(is_weights[i, t]) ** 2
            acc += w * float(m[i, t])
            W[i][t] = acc
    return G, W


@pytest.mark.parametrize("zero_tail", [True, False])
@pytest.mark.parametrize("with_is", [False, True])
def test_optimal_token_baseline_matches_loop(zero_tail, with_is):
    m = mask(LONG)
    r, old, spsq = _inputs(m)
    is_w = torch.rand(BS, T, generator=torch.Generator().manual_seed(3), dtype=old.dtype) + 0.5 if with_is else None
    adv, ret = compute_optimal_token_baseline_advantage(
        r, m, INDEX, old_log_probs=old, sum_pi_squared=spsq, rollout_is_weights=is_w, handle_zero_tail=zero_tail
    )
    G, W = _ref_energy_returns(r, old, spsq, m, is_w)
    Wm = [[W[i][t] * float(m[i, t]) for t in range(T)] for i in range(BS)]
    B = _ref_baselines(G, Wm, LONG, list(INDEX), zero_tail)
    close(adv, [[(G[i][t] - B[i][t]) * float(m[i, t]) for t in range(T)] for i in range(BS)])
    close(ret, [[G[i][t] * float(m[i, t]) for t in range(T)] for i in range(BS)])
    close(adv[7], ret[7])  # a group of one: no baseline


@pytest.mark.parametrize("zero_tail", [True, False])
def test_multi_turn_baseline_lines_up_response_tokens(zero_tail):
    m = mask(LONG)
    m[0, 1] = m[0, 2] = 0.0  # observation spans of different lengths and places
    m[5, 0] = 0.0
    m[2] = 0.0  # a row without any response token: left out of its group
    r, old, spsq = _inputs(m, seed=30)
    adv, ret = compute_multi_turn_optimal_token_baseline_advantage(
        r, m, INDEX, old_log_probs=old, sum_pi_squared=spsq, handle_zero_tail=zero_tail
    )
    G, W = _ref_energy_returns(r, old, spsq, m)
    steps = [[t for t in range(T) if m[i, t]] for i in range(BS)]
    lengths = [len(s) for s in steps]
    Gc = [[G[i][t] for t in steps[i]] + [0.0] * (T - lengths[i]) for i in range(BS)]
    Wc = [[W[i][t] for t in steps[i]] + [0.0] * (T - lengths[i]) for i in range(BS)]
    B = _ref_baselines(Gc, Wc, lengths, list(INDEX), zero_tail)
    expected = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        for k, t in enumerate(steps[i]):
            expected[i][t] = Gc[i][k] - B[i][k]
    close(adv, expected)
    close(ret, [[G[i][t] * float(m[i, t]) for t in range(T)] for i in range(BS)])


def test_multi_turn_equals_single_turn_without_observation_spans():
    m = mask(LONG)
    r, old, spsq = _inputs(m, seed=40)
    kwargs = dict(old_log_probs=old, sum_pi_squared=spsq)
    single = compute_optimal_token_baseline_advantage(r, m, INDEX, **kwargs)
    multi = compute_multi_turn_optimal_token_baseline_advantage(r, m, INDEX, **kwargs)
    close(multi[0], single[0], tol=1e-12)
    close(multi[1], single[1], tol=1e-12)


def test_missing_actor_outputs_name_the_setting():
    m = mask()
    for name in ("optimal_token_baseline", "tir_optimal_token_baseline"):
        with pytest.raises(ValueError, match="sum_pi_squared.*calculate_sum_pi_squared"):
            get_adv_estimator_fn(name)(token_level_rewards=m, response_mask=m, index=INDEX, old_log_probs=m)
