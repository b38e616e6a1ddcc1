"""verl.core_algos.policy_loss_sequence: GMPO (geo_mean) and SAPO against float64 loops, values, metrics and
gradients (GSPO's loop lives with the other ported losses in tests/trainer/ppo/test_core_algos.py)."""

import math

import pytest
import torch
from algo_refs import BS, LENGTHS, T, actor, close, mask, pg_inputs, ref_agg

from verl.core_algos import compute_policy_loss_geo_mean, compute_policy_loss_sapo

LENGTHS_WITH_EMPTY = LENGTHS[:-1] + [0]


def _sign(x: float) -> float:
    return (x > 0) - (x < 0)


@pytest.mark.parametrize("with_is", [False, True])
def test_geo_mean_matches_loop_with_gradient(with_is):
    old, lp, adv, m = pg_inputs(seed=50, lengths=LENGTHS_WITH_EMPTY)
    lp = lp.clone().requires_grad_(True)
    w = torch.rand(BS, T, generator=torch.Generator().manual_seed(4), dtype=old.dtype) + 0.5 if with_is else None
    low, high = 0.2, 0.3
    loss, metrics = compute_policy_loss_geo_mean(
        old, lp, adv, m, "token-mean", actor(clip_ratio_low=low, clip_ratio_high=high), rollout_is_weights=w
    )
    lp_ = lp.detach()
    kept = [i for i in range(BS) if LENGTHS_WITH_EMPTY[i] > 0]
    seq_loss, grads = {}, [[0.0] * T for _ in range(BS)]
    n_high = n_low = n_tok = 0
    kl = 0.0
    for i in kept:
        n = LENGTHS_WITH_EMPTY[i]
        pessimistic, flows = [], []
        for t in range(n):
            d = float(lp_[i, t]) - float(old[i, t])
            c = min(max(d, -low), high)
            s = _sign(float(adv[i, t]))
            pessimistic.append(s * min(s * d, s * c))
            flows.append(s != 0 and s * d <= s * c)  # the unclipped log-ratio is the pessimistic one
            n_tok += 1
            n_high += d != c and float(adv[i, t]) > 0
            n_low += d != c and float(adv[i, t]) < 0
            kl -= d
        rho = math.exp(sum(pessimistic) / (n + 1e-8))
        a = sum(float(adv[i, t]) for t in range(n)) / (n + 1e-8)
        is_w = math.exp(sum(math.log(float(w[i, t]) + 1e-10) for t in range(n)) / (n + 1e-8)) if with_is else 1.0
        seq_loss[i] = -a * rho * is_w
        for t in range(n):
            grads[i][t] = -a * rho * is_w / (n + 1e-8) / len(kept) if flows[t] else 0.0
    close(loss, sum(seq_loss.values()) / len(kept))  # a mean over sequences, whatever loss_agg_mode says
    close(metrics["actor/pg_clipfrac"], n_high / n_tok)
    close(metrics["actor/pg_clipfrac_lower"], n_low / n_tok)
    close(metrics["actor/ppo_kl"], kl / n_tok)
    assert n_high > 0 and n_low > 0
    loss.backward()
    close(lp.grad, grads)


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_sapo_matches_loop_with_gradient(mode):
    old, lp, adv, m = pg_inputs(seed=60)
    lp = lp.clone().requires_grad_(True)
    tau_pos, tau_neg = 1.0, 1.5
    loss, metrics = compute_policy_loss_sapo(old, lp, adv, m, mode, actor(tau_pos=tau_pos, tau_neg=tau_neg))
    lp_ = lp.detach()
    losses = [[0.0] * T for _ in range(BS)]
    dloss = [[0.0] * T for _ in range(BS)]  # d l_t / d logp_t
    for i in range(BS):
        for t in range(T):
            r = math.exp(min(max(float(lp_[i, t]) - float(old[i, t]), -20.0), 20.0))
            a = float(adv[i, t])
            tau = tau_pos if a > 0 else tau_neg
            sig = 1.0 / (1.0 + math.exp(-tau * (r - 1.0)))
            losses[i][t] = -sig * 4.0 / tau * a
            dloss[i][t] = -a * 4.0 * sig * (1.0 - sig) * r
    close(loss, ref_agg(losses, m, mode))
    assert metrics["actor/pg_clipfrac"] == 0.0 and metrics["actor/pg_clipfrac_lower"] == 0.0
    loss.backward()
    n, lengths = sum(LENGTHS), LENGTHS
    scale = [1.0 / n if mode == "token-mean" else 1.0 / (BS * lengths[i]) for i in range(BS)]
    close(lp.grad, [[dloss[i][t] * scale[i] * float(m[i, t]) for t in range(T)] for i in range(BS)])


def test_sapo_gate_has_ppos_gradient_at_the_old_policy():
    """f'(1) = 1: at r = 1 SAPO's gradient is the policy gradient -A grad logp, for either temperature."""
    old = torch.full((1, 2), -1.0, dtype=torch.float64)
    lp = old.clone().requires_grad_(True)
    adv = torch.tensor([[2.0, -3.0]], dtype=torch.float64)
    loss, _ = compute_policy_loss_sapo(old, lp, adv, mask([2], 2), "token-sum", actor(tau_pos=1.0, tau_neg=4.0))
    loss.backward()
    close(lp.grad, [[-2.0, 3.0]])
    with pytest.raises(ValueError, match="tau"):
        compute_policy_loss_sapo(old, lp, adv, mask([2], 2), config=actor(tau_neg=0.0))
