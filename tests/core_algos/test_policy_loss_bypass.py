"""verl.core_algos.policy_loss_bypass: bypass mode's loss against float64 loops written from its docstring: the PPO
loss on the sampler's log-probs without weights, REINFORCE with truncated weights measured against the current policy
(token and sequence level, detached), and rejection that takes tokens out of the loss."""

import math

import pytest
import torch
from algo_refs import BS, LENGTHS, T, actor, close, pg_inputs, ref_agg

from verl.core_algos import (
    POLICY_LOSS_REGISTRY,
    compute_policy_loss_bypass_mode,
    compute_policy_loss_vanilla,
    get_policy_loss_fn,
)


def config(**rollout_correction):
    return actor(clip_ratio=0.2, policy_loss={"rollout_correction": rollout_correction})


def test_registered_under_verls_name():
    assert POLICY_LOSS_REGISTRY["bypass_mode"] is compute_policy_loss_bypass_mode
    assert get_policy_loss_fn("bypass_mode") is compute_policy_loss_bypass_mode


def test_ppo_clip_is_the_vanilla_loss_on_the_sampler_log_probs_without_weights():
    rollout, lp, adv, m = pg_inputs(seed=40)
    weights = torch.full_like(lp, 3.0)  # the caller's weights: not used, the ratio already is the importance ratio
    cfg = config(loss_type="ppo_clip", rollout_is="token", rollout_is_threshold=2.0)
    loss, metrics = compute_policy_loss_bypass_mode(rollout, lp, adv, m, "token-mean", cfg, rollout_is_weights=weights)
    plain, plain_metrics = compute_policy_loss_vanilla(rollout, lp, adv, m, "token-mean", cfg)
    close(loss, plain, tol=1e-12)
    for key, value in plain_metrics.items():
        close(metrics[key], value, tol=1e-12)
    # verl's rollout_corr/ metrics of this micro-batch, the current policy against the sampler
    kl = sum(float(rollout[i, t]) - float(lp[i, t]) for i in range(BS) for t in range(LENGTHS[i])) / sum(LENGTHS)
    close(metrics["rollout_corr/kl"], kl)
    assert all(math.isfinite(v) for v in metrics.values())


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_reinforce_weights_are_truncated_ratios_to_the_current_policy_and_carry_no_gradient(level):
    rollout, lp, adv, m = pg_inputs(seed=50)
    lp = lp.clone().requires_grad_(True)
    cap = 1.5
    cfg = config(loss_type="reinforce", rollout_is=level, rollout_is_threshold=cap)
    loss, _ = compute_policy_loss_bypass_mode(rollout, lp, adv, m, "token-mean", cfg)
    lp_ = lp.detach()
    w = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        if level == "token":
            for t in range(LENGTHS[i]):
                w[i][t] = min(math.exp(float(lp_[i, t]) - float(rollout[i, t])), cap)
        else:
            log_rho = sum(float(lp_[i, t]) - float(rollout[i, t]) for t in range(LENGTHS[i]))
            for t in range(LENGTHS[i]):
                w[i][t] = min(math.exp(log_rho), cap)
    losses = [[-w[i][t] * float(adv[i, t]) * float(lp_[i, t]) for t in range(T)] for i in range(BS)]
    close(loss, ref_agg(losses, m, "token-mean"))
    loss.backward()  # d l / d logp = -w A / n: the weight is a constant of the gradient
    n = sum(LENGTHS)
    close(lp.grad, [[-w[i][t] * float(adv[i, t]) * float(m[i, t]) / n for t in range(T)] for i in range(BS)])


def test_reinforce_without_weights_is_plain_reinforce():
    rollout, lp, adv, m = pg_inputs(seed=60)
    loss, _ = compute_policy_loss_bypass_mode(rollout, lp, adv, m, "token-mean", config(loss_type="reinforce"))
    losses = [[-float(adv[i, t]) * float(lp[i, t]) for t in range(T)] for i in range(BS)]
    close(loss, ref_agg(losses, m, "token-mean"))


def test_rejection_takes_tokens_out_of_the_loss():
    rollout, lp, adv, m = pg_inputs(seed=70)
    # token_k1 keeps 0.8 <= pi_rollout / pi <= 1.25: tokens whose current policy moved further are rejected
    cfg = config(loss_type="reinforce", rollout_rs="token_k1", rollout_rs_threshold="0.8_1.25")
    loss, metrics = compute_policy_loss_bypass_mode(rollout, lp, adv, m, "token-mean", cfg)
    kept = [
        [
            1.0 if t < LENGTHS[i] and 0.8 <= math.exp(float(rollout[i, t]) - float(lp[i, t])) <= 1.25 else 0.0
            for t in range(T)
        ]
        for i in range(BS)
    ]
    assert 0 < sum(map(sum, kept)) < sum(LENGTHS)  # the inputs reject some tokens and keep some
    losses = [[-float(adv[i, t]) * float(lp[i, t]) for t in range(T)] for i in range(BS)]
    close(loss, ref_agg(losses, torch.tensor(kept, dtype=torch.float64), "token-mean"))
    close(metrics["rollout_corr/rollout_rs_masked_fraction"], 1 - sum(map(sum, kept)) / sum(LENGTHS))


def test_missing_settings_and_unknown_loss_type_are_errors_naming_the_key():
    rollout, lp, adv, m = pg_inputs()
    with pytest.raises(ValueError, match="algorithm.rollout_correction.bypass_mode=true"):
        compute_policy_loss_bypass_mode(rollout, lp, adv, m, "token-mean", actor())
    with pytest.raises(ValueError, match="loss_type='ppo'"):
        compute_policy_loss_bypass_mode(rollout, lp, adv, m, "token-mean", config(loss_type="ppo"))
