"""verl.core_algos.policy_loss: verl's call (loss, metrics) with rollout_is_weights and config.global_batch_info,
DRO and REINFORCE against float64 loops (values and gradients)."""

import pytest
import torch
from algo_refs import BS, LENGTHS, T, actor, close, pg_inputs, ref_agg

from verl.core_algos import (
    LOSS_AGG_MODES,
    POLICY_LOSS_REGISTRY,
    compute_policy_loss_dro,
    compute_policy_loss_reinforce,
    compute_policy_loss_vanilla,
    effective_loss_agg_mode,
    get_policy_loss_fn,
    loss_normalizer_counts,
)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_dro_matches_loop_with_gradient(mode):
    old, lp, adv, m = pg_inputs(seed=10)
    lp = lp.clone().requires_grad_(True)
    beta = 0.3
    loss, metrics = compute_policy_loss_dro(old, lp, adv, m, mode, actor(policy_loss={"dro_beta": beta}))
    lp_ = lp.detach()
    losses = [[0.0] * T for _ in range(BS)]
    grad_tok = [[0.0] * T for _ in range(BS)]
    kl = 0.0
    for i in range(BS):
        for t in range(T):
            d = float(lp_[i, t]) - float(old[i, t])
            losses[i][t] = -(float(lp_[i, t]) * float(adv[i, t]) - 0.5 * beta * d * d)
            grad_tok[i][t] = -float(adv[i, t]) + beta * d  # d l / d logp
            kl -= d if m[i, t] else 0.0
    n = sum(LENGTHS)
    close(loss, ref_agg(losses, m, mode))
    close(metrics["actor/ppo_kl"], kl / n)
    loss.backward()
    if mode == "token-mean":
        close(lp.grad, [[grad_tok[i][t] * float(m[i, t]) / n for t in range(T)] for i in range(BS)])


def test_dro_needs_a_positive_beta():
    old, lp, adv, m = pg_inputs()
    for config in (actor(), actor(policy_loss={"dro_beta": None}), actor(dro_beta=0.0)):
        with pytest.raises(ValueError, match="dro_beta"):
            compute_policy_loss_dro(old, lp, adv, m, "token-mean", config)
    top_level = compute_policy_loss_dro(old, lp, adv, m, "token-mean", actor(dro_beta=0.1))[0]  # a ported dict's place
    close(top_level, compute_policy_loss_dro(old, lp, adv, m, "token-mean", actor(policy_loss={"dro_beta": 0.1}))[0])


@pytest.mark.parametrize("weighted", [False, True])
def test_reinforce_matches_loop(weighted):
    rollout, lp, adv, m = pg_inputs(seed=20)
    w = torch.rand(BS, T, generator=torch.Generator().manual_seed(1), dtype=lp.dtype) if weighted else None
    loss, metrics = compute_policy_loss_reinforce(rollout, lp, adv, m, config=actor(), rollout_is_weights=w)
    losses = [
        [-float(adv[i, t]) * float(lp[i, t]) * (float(w[i, t]) if weighted else 1.0) for t in range(T)]
        for i in range(BS)
    ]
    close(loss, ref_agg(losses, m, "seq-mean-token-sum"))  # REINFORCE's default: a sum per sequence
    kl = sum(float(rollout[i, t]) - float(lp[i, t]) for i in range(BS) for t in range(LENGTHS[i]))
    close(metrics["actor/ppo_kl"], kl / sum(LENGTHS))
    assert "reinforce" not in POLICY_LOSS_REGISTRY  # as verl: reached through rollout correction, not a loss mode


def test_rollout_is_weights_multiply_every_token_loss():
    old, lp, adv, m = pg_inputs(seed=30)
    w = torch.rand(BS, T, generator=torch.Generator().manual_seed(2), dtype=lp.dtype) + 0.5
    cfg = actor(clip_ratio=0.2, policy_loss={"dro_beta": 0.1, "kl_cov_ratio": 0.1})
    for name in sorted(POLICY_LOSS_REGISTRY):
        # geo_mean: per-sequence weight (its own test); clip_cov: random picks; bypass_mode measures its own weights
        if name in ("geo_mean", "clip_cov", "bypass_mode"):
            continue
        fn = get_policy_loss_fn(name)
        mode = effective_loss_agg_mode(name, "token-mean")
        plain = fn(old, lp, adv, m, mode, cfg)[0]
        scaled = fn(old, lp, adv, m, mode, cfg, rollout_is_weights=torch.full_like(lp, 2.0))[0]
        close(scaled, 2 * plain, tol=1e-12)
        assert not torch.allclose(fn(old, lp, adv, m, mode, cfg, rollout_is_weights=w)[0], plain), name


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("dp", [1, 2])
def test_global_batch_info_from_the_config(mode, dp):
    """verl's engine fills config.global_batch_info per micro-batch; the losses pass it to agg_loss, so micro-batches
    on dp ranks add up (after FSDP's average) to the whole batch's loss."""
    old, lp, adv, m = pg_inputs(seed=40)
    counts = loss_normalizer_counts(m)
    info = {"dp_size": dp, "batch_num_tokens": counts[0].item(), "global_batch_size": counts[1].item()}
    cfg = actor(clip_ratio=0.2, global_batch_info=info)
    whole = compute_policy_loss_vanilla(old, lp, adv, m, mode, actor(clip_ratio=0.2))[0]
    total = 0.0
    for rank_rows in torch.arange(BS).chunk(dp):
        for rows in rank_rows.split(2):
            total += float(compute_policy_loss_vanilla(old[rows], lp[rows], adv[rows], m[rows], mode, cfg)[0]) / dp
    assert total == pytest.approx(float(whole), rel=1e-12)


def test_loss_scale_factor_from_the_global_batch_info():
    old, lp, adv, m = pg_inputs(seed=41)
    cfg = actor(global_batch_info={"loss_scale_factor": 2 * T})
    pg = compute_policy_loss_vanilla(old, lp, adv, m, "seq-mean-token-sum-norm", cfg)[0]
    close(2 * pg, compute_policy_loss_vanilla(old, lp, adv, m, "seq-mean-token-sum-norm", actor())[0])


def test_the_leaf_takes_typed_sections_and_verls_path_converts_dicts():
    """verl.core_algos sits below the schema, so it cannot fill a dict's missing keys: a dict or None is a TypeError
    naming the conversion; verl.trainer.ppo.core_algos converts one (its defaults: the schema's), also for a loss
    fetched by name."""
    from verl.trainer.ppo import core_algos as verl_path

    old, lp, adv, m = pg_inputs(seed=42)
    for config in ({"clip_ratio": 0.2}, None):
        with pytest.raises(TypeError, match="as_section"):
            compute_policy_loss_vanilla(old, lp, adv, m, "token-mean", config)
    typed = compute_policy_loss_vanilla(old, lp, adv, m, "token-mean", actor())[0]
    for config in ({}, None):
        close(verl_path.compute_policy_loss_vanilla(old, lp, adv, m, "token-mean", config)[0], typed, tol=0)
        close(verl_path.get_policy_loss_fn("vanilla")(old, lp, adv, m, "token-mean", config)[0], typed, tol=0)
    assert verl_path.get_policy_loss_fn("vanilla") is verl_path.compute_policy_loss_vanilla


def test_sequence_level_losses_fix_their_aggregation():
    for name in ("gspo", "sapo", "geo_mean"):
        assert effective_loss_agg_mode(name, "token-mean") == "seq-mean-token-mean"
    assert effective_loss_agg_mode("vanilla", "token-sum") == "token-sum"
