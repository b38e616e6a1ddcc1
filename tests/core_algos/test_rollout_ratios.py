"""verl.core_algos.rollout_ratios: the per-token log ratio, its bounded exponential, the k1/k2/k3 divergences and the
per-row aggregates, against hand-computed values and float64 loops; padding garbage never leaks."""

import math

import torch
from algo_refs import close
from rollout_refs import log_ratio_rows, mismatch_inputs

from verl.core_algos.rollout_ratios import (
    SAFETY_BOUND,
    bounded_exp,
    geometric_log_ratio,
    k1_divergence,
    k2_divergence,
    k3_divergence,
    rollout_log_ratio,
    sequence_log_ratio,
    sequence_max,
    sequence_mean,
    sequence_sum,
    token_is_ratios,
)


def test_log_ratio_is_old_minus_rollout_and_zero_on_padding_whatever_it_holds():
    old, rollout, m = mismatch_inputs()
    lr = rollout_log_ratio(old, rollout, m)
    assert torch.isfinite(lr).all()
    rows = log_ratio_rows(old, rollout, m)
    expected = [[0.0] * m.shape[1] for _ in range(len(m))]
    for i, toks in enumerate(rows):
        for t, value in toks:
            expected[i][t] = value
    close(lr, expected)


def test_hand_computed_divergences():
    lr = torch.tensor([math.log(2.0), 0.0, -math.log(4.0)], dtype=torch.float64)
    close(k1_divergence(lr), [-math.log(2.0), 0.0, math.log(4.0)])
    close(k2_divergence(lr), [0.5 * math.log(2.0) ** 2, 0.0, 0.5 * math.log(4.0) ** 2])
    close(k3_divergence(lr), [2.0 - 1.0 - math.log(2.0), 0.0, 0.25 - 1.0 + math.log(4.0)])
    assert (k2_divergence(lr) >= 0).all() and (k3_divergence(lr) >= 0).all()


def test_bounded_exp_and_bounded_divergences_stay_finite():
    lr = torch.tensor([1e4, -1e4, float("inf"), float("-inf")], dtype=torch.float64)
    close(bounded_exp(lr), [math.exp(SAFETY_BOUND), math.exp(-SAFETY_BOUND)] * 2)
    for fn in (k1_divergence, k2_divergence, k3_divergence):
        assert torch.isfinite(fn(lr)).all(), fn.__name__
    assert torch.isnan(bounded_exp(torch.tensor([float("nan")]))).all()  # NaN is not hidden


def test_token_sequence_and_geometric_ratios_match_loops():
    old, rollout, m = mismatch_inputs(seed=3)
    lr = rollout_log_ratio(old, rollout, m)
    rows = log_ratio_rows(old, rollout, m)
    close(
        token_is_ratios(lr, m),
        [[math.exp(lr[i, t]) if m[i, t] else 0.0 for t in range(m.shape[1])] for i in range(len(m))],
    )
    close(sequence_log_ratio(lr, m), [sum(v for _, v in toks) for toks in rows])
    close(geometric_log_ratio(lr, m), [sum(v for _, v in toks) / len(toks) if toks else 0.0 for toks in rows])


def test_row_aggregates_read_only_response_tokens():
    values = torch.tensor([[1.0, -2.0, 5.0], [float("nan"), float("inf"), 3.0], [7.0, 8.0, 9.0]])
    m = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    close(sequence_sum(values, m), [-1.0, 3.0, 0.0])
    close(sequence_mean(values, m), [-0.5, 3.0, 0.0])  # a row without tokens: 0
    close(sequence_max(values, m), [1.0, 3.0, 0.0])
    with_nan = torch.tensor([[1.0, float("nan")]])
    assert torch.isnan(sequence_max(with_nan, torch.ones(1, 2))).all()  # NaN on a response token shows
