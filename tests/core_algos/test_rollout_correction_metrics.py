"""verl.core_algos.rollout_correction_metrics: the off-policy metrics (KL, perplexities, chi^2) and the per-token
probability mismatch (max / mean / std of |p_old - p_rollout|, Pearson correlation) against float64 loops and hand
values; rows without tokens, a batch without tokens, degenerate inputs."""

import math

import torch
from algo_refs import close
from rollout_refs import mismatch_inputs, ref_mismatch, ref_offpolicy

from verl.core_algos.rollout_correction_metrics import (
    compute_is_metrics,
    compute_mismatch_metrics,
    compute_offpolicy_metrics,
    compute_rs_metrics,
)


def _all_close(actual: dict, expected: dict, tol: float = 1e-9) -> None:
    assert set(actual) == set(expected), set(actual) ^ set(expected)
    for key, value in expected.items():
        assert math.isclose(actual[key], value, rel_tol=tol, abs_tol=tol), (key, actual[key], value)


def test_offpolicy_metrics_match_float64_loops():
    old, rollout, m = mismatch_inputs(seed=7, scale=0.5)
    _all_close(compute_offpolicy_metrics(old, rollout, m), ref_offpolicy(old, rollout, m))


def test_offpolicy_metrics_hand_values():
    # one row, two tokens: p_old = (1/2, 1/4), p_rollout = (1/4, 1/4)
    old = torch.tensor([[math.log(0.5), math.log(0.25)]], dtype=torch.float64)
    rollout = torch.tensor([[math.log(0.25), math.log(0.25)]], dtype=torch.float64)
    metrics = compute_offpolicy_metrics(old, rollout, torch.ones(1, 2, dtype=torch.float64))
    close(metrics["training_ppl"], 1 / math.sqrt(0.5 * 0.25))  # exp(-mean log p)
    close(metrics["rollout_ppl"], 4.0)
    close(metrics["kl"], -math.log(2.0) / 2)  # token mean of log p_roll - log p_old
    close(metrics["k3_kl"], (2.0 - 1.0 - math.log(2.0)) / 2)
    close(metrics["chi2_token"], (4.0 + 1.0) / 2 - 1.0)
    close(metrics["chi2_seq"], 4.0 - 1.0)  # (prod rho)^2 - 1 with prod rho = 2
    close(metrics["ppl_ratio"], math.sqrt(0.5))  # ppl_old / ppl_roll = 1 / geometric-mean ratio
    close(metrics["log_ppl_diff"], math.log(math.sqrt(0.5)))


def test_offpolicy_metrics_without_rollout_log_probs_or_tokens():
    old, _, m = mismatch_inputs()
    assert set(compute_offpolicy_metrics(old, None, m)) == {"training_ppl", "training_log_ppl"}
    assert compute_offpolicy_metrics(old, old, torch.zeros_like(m)) == {}


def test_mismatch_metrics_match_float64_loops_and_ignore_padding():
    old, rollout, m = mismatch_inputs(seed=8, scale=0.2)
    _all_close(compute_mismatch_metrics(old, rollout, m), ref_mismatch(old, rollout, m))


def test_mismatch_metrics_hand_values_and_degenerate_inputs():
    old = torch.log(torch.tensor([[0.5, 0.2, 0.9]], dtype=torch.float64))
    rollout = torch.log(torch.tensor([[0.4, 0.2, 0.8]], dtype=torch.float64))
    metrics = compute_mismatch_metrics(old, rollout, torch.ones(1, 3))
    close(metrics["training/rollout_probs_diff_max"], 0.1)
    close(metrics["training/rollout_probs_diff_mean"], 0.2 / 3)
    close(metrics["training/rollout_probs_diff_std"], math.sqrt(((0.1 - 0.2 / 3) ** 2 * 2 + (0.2 / 3) ** 2) / 2))
    assert metrics["training/rollout_actor_probs_pearson_corr"] > 0.99
    one = compute_mismatch_metrics(old, rollout, torch.tensor([[1.0, 0.0, 0.0]]))
    assert one["training/rollout_probs_diff_std"] == 0.0  # a single token does not spread
    assert math.isnan(one["training/rollout_actor_probs_pearson_corr"])  # undefined, and said so
    assert compute_mismatch_metrics(old, rollout, torch.zeros(1, 3)) == {"training/rollout_probs_diff_valid": 0}


def test_identical_policies_measure_no_mismatch():
    old, _, m = mismatch_inputs(seed=9)
    metrics = compute_offpolicy_metrics(old, old, m)
    for key in ("kl", "k3_kl", "log_ppl_diff", "log_ppl_abs_diff", "chi2_token", "chi2_seq"):
        assert abs(metrics[key]) < 1e-12, key
    close(metrics["ppl_ratio"], 1.0)
    mismatch = compute_mismatch_metrics(old, old, m)
    assert mismatch["training/rollout_probs_diff_max"] == 0.0
    close(mismatch["training/rollout_actor_probs_pearson_corr"], 1.0)


def test_weight_and_rejection_metrics_need_a_token():
    empty = torch.zeros(2, 3)
    assert compute_is_metrics(torch.zeros(2, 3), torch.zeros(2, 3), empty, "token", 2.0) == {}
    no_rows = torch.zeros(2, dtype=torch.bool)
    kwargs = {"per_sequence_values": None, "rollout_rs_threshold": 1.0, "rollout_rs_threshold_lower": 0.0}
    metrics = compute_rs_metrics(
        "token_k2", torch.zeros(2, 3), empty, no_rows, level="token", apply_lower_threshold=False, **kwargs
    )
    assert metrics == {}
