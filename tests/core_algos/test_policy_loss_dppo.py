"""verl.core_algos.policy_loss_dppo: DPPO's binary-TV and binary-KL trust regions against float64 loops (values,
metrics, gradients), and the direction rule: only a move the advantage asks for is bounded."""

import math

import pytest
import torch
from algo_refs import BS, LENGTHS, T, actor, close, pg_inputs, ref_agg

from verl.core_algos import compute_policy_loss_dppo_kl, compute_policy_loss_dppo_tv


def _in_region_tv(p: float, p_old: float, a: float, low: float, high: float) -> bool:
    return p - p_old <= high if a > 0 else p - p_old >= -low


def _in_region_kl(p: float, p_old: float, a: float, low: float, high: float) -> bool:
    d = p_old * (math.log(p_old) - math.log(p)) + (1 - p_old) * math.log((1 - p_old + 1e-8) / (1 - p + 1e-8))
    return (d <= high or p <= p_old) if a > 0 else (d <= low or p >= p_old)


CASES = [
    (compute_policy_loss_dppo_tv, _in_region_tv, 0.03, 0.05),
    (compute_policy_loss_dppo_kl, _in_region_kl, 0.005, 0.01),
]


@pytest.mark.parametrize("fn,in_region,low,high", CASES, ids=["tv", "kl"])
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_dppo_matches_loop_with_gradient(fn, in_region, low, high, mode):
    old, lp, adv, m = pg_inputs(seed=70)
    lp = lp.clone().requires_grad_(True)
    cap = 1.3
    cfg = actor(clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=cap)
    loss, metrics = fn(old, lp, adv, m, mode, cfg)
    lp_ = lp.detach()
    losses = [[0.0] * T for _ in range(BS)]
    dloss = [[0.0] * T for _ in range(BS)]
    n_out = n_capped = 0
    kl = 0.0
    for i in range(BS):
        for t in range(T):
            d = min(max(float(lp_[i, t]) - float(old[i, t]), -20.0), 20.0)
            r, a = math.exp(d), float(adv[i, t])
            v = in_region(math.exp(float(lp_[i, t])), math.exp(float(old[i, t])), a, low, high)
            losses[i][t] = -a * min(r, cap) * float(lp_[i, t]) * v
            dloss[i][t] = -a * min(r, cap) * v  # the truncated ratio is a constant: only logp carries a gradient
            if m[i, t]:
                n_out += not v
                n_capped += v and r > cap
                kl -= d
    n = sum(LENGTHS)
    close(loss, ref_agg(losses, m, mode))
    close(metrics["actor/pg_clipfrac"], n_out / n)
    close(metrics["actor/pg_clipfrac_lower"], n_capped / n)
    close(metrics["actor/ppo_kl"], kl / n)
    assert 0 < n_out < n and n_capped > 0  # both the region and the cap are exercised
    loss.backward()
    scale = [1.0 / n if mode == "token-mean" else 1.0 / (BS * LENGTHS[i]) for i in range(BS)]
    close(lp.grad, [[dloss[i][t] * scale[i] * float(m[i, t]) for t in range(T)] for i in range(BS)])


@pytest.mark.parametrize("fn", [compute_policy_loss_dppo_tv, compute_policy_loss_dppo_kl], ids=["tv", "kl"])
def test_dppo_bounds_only_the_move_the_advantage_asks_for(fn):
    # token 0: p rose from 0.3 to 0.6 with A > 0 (the move A asks for, too far): dropped
    # token 1: the same rise with A < 0 (against A's push): kept; token 2: p fell 0.6 -> 0.3 with A < 0: dropped
    old = torch.log(torch.tensor([[0.3, 0.3, 0.6]], dtype=torch.float64))
    lp = torch.log(torch.tensor([[0.6, 0.6, 0.3]], dtype=torch.float64))
    adv = torch.tensor([[1.0, -1.0, -1.0]], dtype=torch.float64)
    _, metrics = fn(old, lp, adv, torch.ones_like(adv), "token-mean", actor(clip_ratio=0.1))
    close(metrics["actor/pg_clipfrac"], 2 / 3)


def test_dppo_truncation_cap_is_the_actors_clip_ratio_c():
    """The cap is actor.clip_ratio_c with the schema's default, 3 (verl's ActorConfig gives its DPPO the same); the
    paper's large cap is a setting."""
    _, _, adv, m = pg_inputs(seed=71)
    old = torch.full_like(adv, -5.0)
    lp = old + 2.0  # ratios e^2 = 7.4: above the default cap 3, below 20
    wide = {"clip_ratio": 1.0}  # a trust region no token leaves: every token is truncated, none dropped
    _, metrics = compute_policy_loss_dppo_tv(old, lp, adv, m, "token-mean", actor(**wide))
    assert metrics["actor/pg_clipfrac_lower"] == 1.0 and metrics["actor/pg_clipfrac"] == 0.0
    _, metrics = compute_policy_loss_dppo_tv(old, lp, adv, m, "token-mean", actor(**wide, clip_ratio_c=20.0))
    assert metrics["actor/pg_clipfrac_lower"] == 0.0
