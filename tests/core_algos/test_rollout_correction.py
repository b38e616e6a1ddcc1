"""verl.core_algos.rollout_correction: importance weights (token / sequence / geometric, truncated, batch-normalised)
and rejection (every token / sequence k1 / k2 / k3 option, the seq_max veto, several options at once) against
hand-computed cases and the float64 loops of rollout_refs; masked tokens, empty masks, NaN / inf."""

import math

import pytest
import torch
from algo_refs import close
from rollout_refs import mismatch_inputs, ref_is, ref_keep, ref_offpolicy

from verl.core_algos.rollout_correction import (
    ROLLOUT_IS_LEVELS,
    SUPPORTED_ROLLOUT_RS_OPTIONS,
    compute_rollout_correction,
    compute_rollout_correction_weights,
    compute_rollout_rejection_mask,
    parse_rollout_rs,
    parse_rollout_rs_thresholds,
    truncate_is_weights,
)
from verl.core_algos.rollout_ratios import rollout_log_ratio

# bounds that reject some but not all of mismatch_inputs(seed=2, scale=0.15)'s tokens, per option
THRESHOLDS = {
    "token_k1": "0.85_1.15",
    "token_k2": 0.01,
    "token_k3": 0.01,
    "seq_sum_k1": "0.8_1.2",
    "seq_sum_k2": 0.05,
    "seq_sum_k3": 0.05,
    "seq_mean_k1": "0.95_1.05",
    "seq_mean_k2": 0.009,
    "seq_mean_k3": 0.009,
    "seq_max_k2": 0.02,
    "seq_max_k3": 0.02,
}


def _metrics_close(actual: dict, expected: dict, tol: float = 1e-9) -> None:
    assert set(actual) == set(expected), set(actual) ^ set(expected)
    for key, value in expected.items():
        assert math.isclose(actual[key], value, rel_tol=tol, abs_tol=tol), (key, actual[key], value)


# ---------------------------------------------------------------------------------------------------- weights
def test_hand_computed_weights_of_each_level():
    # row 0: ratios 3 and 1/2 (product 1.5); row 1: ratio 1/4 then padding
    lr = torch.tensor([[math.log(3.0), math.log(0.5)], [math.log(0.25), 0.0]], dtype=torch.float64)
    m = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    token, _ = compute_rollout_correction_weights(lr, m, "token", 2.0)
    close(token, [[2.0, 0.5], [0.25, 0.0]])  # 3 is cut to the cap, small weights stay
    sequence, _ = compute_rollout_correction_weights(lr, m, "sequence", 2.0)
    close(sequence, [[1.5, 1.5], [0.25, 0.0]])
    geometric, _ = compute_rollout_correction_weights(lr, m, "geometric", 2.0)
    close(geometric, [[math.sqrt(1.5)] * 2, [0.25, 0.0]])
    normalised, metrics = compute_rollout_correction_weights(lr, m, "sequence", 2.0, rollout_is_batch_normalize=True)
    close(metrics["rollout_is_batch_norm_factor"], (1.5 + 0.25) / 2)  # mean over rows, not tokens
    close(normalised, [[1.5 / 0.875] * 2, [0.25 / 0.875, 0.0]])


@pytest.mark.parametrize("level", ROLLOUT_IS_LEVELS)
@pytest.mark.parametrize("normalize", [False, True])
def test_weights_and_metrics_match_float64_reference(level, normalize):
    old, rollout, m = mismatch_inputs(seed=1, scale=0.4)
    lr = rollout_log_ratio(old, rollout, m)
    weights, metrics = compute_rollout_correction_weights(lr, m, level, 1.5, normalize)
    expected_weights, expected_metrics = ref_is(old, rollout, m, level, 1.5, normalize)
    close(weights, expected_weights)
    _metrics_close(metrics, expected_metrics)


def test_truncated_weights_are_detached_and_capped_only_above():
    w = torch.tensor([0.1, 1.0, 5.0], dtype=torch.float64, requires_grad=True)
    out = truncate_is_weights(w * 1.0, 2.0)
    assert not out.requires_grad
    close(out, [0.1, 1.0, 2.0])


def test_a_sequence_weight_with_huge_log_ratio_is_bounded_then_capped():
    lr = torch.tensor([[400.0, 400.0], [float("inf"), 0.0]], dtype=torch.float64)
    weights, metrics = compute_rollout_correction_weights(lr, torch.ones(2, 2, dtype=torch.float64), "sequence", 3.0)
    close(weights, [[3.0, 3.0], [3.0, 3.0]])
    assert math.isclose(metrics["rollout_is_max"], math.exp(20.0)) and all(map(math.isfinite, metrics.values()))


@pytest.mark.parametrize("bad", [{"rollout_is": "seq"}, {"rollout_is_threshold": 0.0}])
def test_bad_weight_settings_name_the_key(bad):
    lr, m = torch.zeros(1, 2), torch.ones(1, 2)
    args = {"rollout_is": "token", "rollout_is_threshold": 2.0, **bad}
    with pytest.raises(ValueError, match="algorithm.rollout_correction." + next(iter(bad))):
        compute_rollout_correction_weights(lr, m, **args)


# -------------------------------------------------------------------------------------------------- rejection
@pytest.mark.parametrize("option", sorted(SUPPORTED_ROLLOUT_RS_OPTIONS))
def test_each_rejection_option_keeps_what_the_reference_keeps(option):
    old, rollout, m = mismatch_inputs(seed=2, scale=0.15)
    spec = THRESHOLDS[option]
    lower, upper = parse_rollout_rs_thresholds([option], spec)[option]
    new_mask, metrics = compute_rollout_rejection_mask(rollout_log_ratio(old, rollout, m), m, option, spec)
    keep = ref_keep(old, rollout, m, option, lower, upper)
    expected = [[float(m[i, t]) * keep[i][t] for t in range(m.shape[1])] for i in range(len(m))]
    close(new_mask, expected)
    assert new_mask.dtype == m.dtype
    rejected = sum(1 for i in range(len(m)) for t in range(m.shape[1]) if m[i, t] and not keep[i][t])
    close(metrics[f"rollout_rs_{option}_masked_fraction"], rejected / m.sum().item())
    close(metrics["rollout_rs_masked_fraction"], rejected / m.sum().item())
    assert 0 < rejected < m.sum().item(), "the case should reject some tokens, not all"


def test_seq_max_veto_rejects_a_whole_sequence_for_one_token():
    # row 0 clean but for one token (log ratio 1: k2 = 0.5); row 1 clean everywhere
    lr = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.01, -0.01, 0.0, 0.0]])
    m = torch.ones(2, 4)
    new_mask, metrics = compute_rollout_rejection_mask(lr, m, "seq_max_k2", 0.1)
    close(new_mask, [[0, 0, 0, 0], [1, 1, 1, 1]])
    close(metrics["rollout_rs_seq_masked_fraction"], 0.5)
    mean_mask, _ = compute_rollout_rejection_mask(lr, m, "seq_mean_k2", 0.2)  # the mean (0.125) lets it through
    close(mean_mask, m)


def test_geometric_filter_on_the_mean_log_ratio_and_k1_bound_direction():
    # mean log ratio of row 0 is log 1.2 (ratio pi_old/pi_rollout 1.2), of row 1 log(1/1.2)
    lr = torch.tensor([[math.log(1.2)] * 3, [-math.log(1.2)] * 3])
    m = torch.ones(2, 3)
    both, _ = compute_rollout_rejection_mask(lr, m, "seq_mean_k1", "0.9_1.25")
    # k1 = -log ratio: the bounds apply to pi_rollout / pi_old (1/1.2 ~ 0.83 out, 1.2 in), verl's convention
    close(both, [[0, 0, 0], [1, 1, 1]])
    symmetric, _ = compute_rollout_rejection_mask(lr, m, "seq_mean_k1", 1.25)  # 1/1.25 .. 1.25: both kept
    close(symmetric, m)


def test_several_options_must_all_pass_and_thresholds_broadcast():
    old, rollout, m = mismatch_inputs(seed=4, scale=0.2)
    lr = rollout_log_ratio(old, rollout, m)
    together, metrics = compute_rollout_rejection_mask(lr, m, "token_k1, seq_max_k3,token_k1", "0.8_1.25,0.05")
    a, _ = compute_rollout_rejection_mask(lr, m, "token_k1", "0.8_1.25")
    b, _ = compute_rollout_rejection_mask(lr, m, "seq_max_k3", 0.05)
    close(together, a * b)
    assert "rollout_rs_token_k1_mean" in metrics and "rollout_rs_seq_max_k3_mean" in metrics
    one_for_all, _ = compute_rollout_rejection_mask(lr, m, "token_k2,seq_mean_k3", 0.02)
    c, _ = compute_rollout_rejection_mask(lr, m, "token_k2", 0.02)
    d, _ = compute_rollout_rejection_mask(lr, m, "seq_mean_k3", 0.02)
    close(one_for_all, c * d)


def test_rejection_metrics_of_a_sequence_option_match_hand_values():
    lr = torch.tensor([[0.0, 0.2, 0.0], [0.1, 0.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    _, metrics = compute_rollout_rejection_mask(lr, m, "seq_sum_k2", 0.015)
    s0, s1 = 0.5 * 0.2**2, 0.5 * 0.1**2  # 0.02 (rejected), 0.005 (kept)
    p = "rollout_rs_seq_sum_k2"
    close(metrics[f"{p}_mean"], (3 * s0 + 2 * s1) / 5)  # token mean of the rows' values
    close([metrics[f"{p}_max"], metrics[f"{p}_min"]], [s0, s1])
    close(metrics[f"{p}_fraction_high"], 0.5)
    close(metrics[f"{p}_fraction_low"], 0.0)
    c = [min(s0, 0.015)] * 3 + [s1] * 2  # clamped to [0, upper] for the spread
    mean_c = sum(c) / 5
    close(metrics[f"{p}_std"], math.sqrt(sum(x * x for x in c) / 5 - mean_c**2))
    close(metrics[f"{p}_seq_std"], abs(s0 - s1) / math.sqrt(2))
    close(metrics[f"{p}_seq_max_deviation"], s0)
    close([metrics[f"{p}_masked_fraction"], metrics[f"{p}_seq_masked_fraction"]], [3 / 5, 0.5])


@pytest.mark.parametrize(
    ("rollout_rs", "threshold", "match"),
    [
        ("token_k4", 1.0, "unknown option 'token_k4'"),
        ("", 1.0, "rollout_rs=''"),
        ("token_k1", None, "rollout_rs_threshold=None"),
        ("token_k2", "0.5_2", "token_k2 takes one upper bound"),
        ("token_k1,token_k2,token_k3", "1,2", "one per option"),
        ("token_k3", -1.0, "positive"),
        ("seq_sum_k1", "2_0.5", "above its upper bound"),
        ("token_k2", "abc", "not a number"),
    ],
)
def test_bad_rejection_settings_are_errors_naming_the_key(rollout_rs, threshold, match):
    with pytest.raises(ValueError, match="algorithm.rollout_correction.rollout_rs") as info:
        parse_rollout_rs_thresholds(parse_rollout_rs(rollout_rs), threshold)
    assert match in str(info.value)


def test_single_k1_number_means_reciprocal_bounds():
    assert parse_rollout_rs_thresholds(["token_k1", "token_k3"], 2) == {"token_k1": (0.5, 2.0), "token_k3": (None, 2.0)}


# ---------------------------------------------------------------------------------------- edge cases together
def test_padding_garbage_and_empty_rows_change_nothing():
    old, rollout, m = mismatch_inputs(seed=5)
    clean_old = torch.where(m.bool(), old, torch.zeros_like(old))
    clean_rollout = torch.where(m.bool(), rollout, torch.zeros_like(rollout))
    args = {"rollout_is": "sequence", "rollout_rs": "token_k1,seq_mean_k3", "rollout_rs_threshold": "0.7_1.4,0.05"}
    w1, m1, metrics1 = compute_rollout_correction(old, rollout, m, **args)
    w2, m2, metrics2 = compute_rollout_correction(clean_old, clean_rollout, m, **args)
    assert torch.equal(w1, w2) and torch.equal(m1, m2) and metrics1 == metrics2
    assert torch.isfinite(w1).all() and (w1[m == 0] == 0).all()
    assert all(math.isfinite(v) for v in metrics1.values())


def test_an_empty_mask_corrects_nothing_and_measures_nothing():
    old, rollout = torch.full((2, 3), -1.0), torch.full((2, 3), float("nan"))
    m = torch.zeros(2, 3)
    weights, new_mask, metrics = compute_rollout_correction(
        old, rollout, m, rollout_is="token", rollout_rs="seq_max_k2", rollout_rs_threshold=0.1
    )
    assert torch.equal(weights, torch.zeros(2, 3)) and torch.equal(new_mask, m) and metrics == {}


def test_infinite_and_nan_log_probs_on_response_tokens():
    old = torch.tensor([[-1.0, float("-inf"), -1.0], [-1.0, float("nan"), -1.0], [-1.0, -1.0, -1.0]])
    rollout = torch.full((3, 3), -1.0)
    m = torch.ones(3, 3)
    weights, new_mask, _ = compute_rollout_correction(
        old, rollout, m, rollout_is="token", rollout_rs="token_k2,seq_max_k2", rollout_rs_threshold=1.0
    )
    close(weights[0], [1.0, math.exp(-20.0), 1.0])  # -inf: the bounded smallest ratio, never NaN
    assert torch.isnan(weights[1, 1]) and torch.isfinite(weights[1, [0, 2]]).all()  # NaN shows where it is
    close(new_mask, [[0, 0, 0], [0, 0, 0], [1, 1, 1]])  # both bad rows rejected (veto), the clean one kept


def test_compute_rollout_correction_prefixes_and_measures_before_rejection():
    old, rollout, m = mismatch_inputs(seed=6, scale=0.3)
    weights, new_mask, metrics = compute_rollout_correction(old, rollout, m)
    assert weights is None and new_mask is m
    _metrics_close(metrics, {f"rollout_corr/{k}": v for k, v in ref_offpolicy(old, rollout, m).items()})
    _, rejected, with_rs = compute_rollout_correction(old, rollout, m, rollout_rs="token_k3", rollout_rs_threshold=0.01)
    assert rejected.sum() < m.sum()
    assert with_rs["rollout_corr/kl"] == metrics["rollout_corr/kl"]  # off-policy metrics on the original mask
    with pytest.raises(ValueError, match=r"rollout_log_probs \(6, 8\)"):
        compute_rollout_correction(old, rollout[:, :8], m)
