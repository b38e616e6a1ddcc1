"""verl.trainer.ppo.core_algos against hand-written float64 loops (one batch row and one token at a time) and
hand-computed tiny cases. Everything under test is a pure function of its inputs: same inputs, same outputs."""

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from verl.trainer.ppo import core_algos as ca
from verl.utils.torch_functional import entropy_from_logits, masked_mean, masked_sum, masked_var, masked_whiten

BS, T = 8, 7
LENGTHS = [7, 5, 3, 1, 6, 7, 2, 4]  # trailing padding after each length
UIDS = np.array(["a", "b", "a", "c", "b", "a", "c", "b"], dtype=object)  # groups interleaved, sizes 3/3/2
AGG_MODES = ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mask(lengths=LENGTHS, length=T) -> torch.Tensor:
    return torch.tensor([[1.0 if t < n else 0.0 for t in range(length)] for n in lengths], dtype=torch.float64)


def _randn(*shape, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed), dtype=torch.float64) * scale


def _outcome_rewards(scores, lengths=LENGTHS, length=T) -> torch.Tensor:
    """Scores placed on each response's last token (as the reward manager does)."""
    r = torch.zeros(len(scores), length, dtype=torch.float64)
    for i, (s, n) in enumerate(zip(scores, lengths)):
        r[i, max(n, 1) - 1] = s
    return r


def _close(actual, expected, tol: float = 1e-9) -> None:
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert torch.allclose(torch.as_tensor(actual, dtype=torch.float64), expected, atol=tol, rtol=tol), (
        actual,
        expected,
    )


# ------------------------------------------------------------------ reference loops


def ref_masked_mean(x, m) -> float:
    num = den = 0.0
    for i in range(len(x)):
        for t in range(len(x[i])):
            if m[i][t]:
                num += float(x[i][t])
                den += 1.0
    return num / den if den else 0.0


def ref_whiten(x, m) -> list[list[float]]:
    """(x - mean) / sqrt(var + 1e-8) with the unbiased variance over valid entries; padding set to 0."""
    vals = [float(x[i][t]) for i in range(len(x)) for t in range(len(x[i])) if m[i][t]]
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    return [
        [(float(x[i][t]) - mean) / math.sqrt(var + 1e-8) if m[i][t] else 0.0 for t in range(len(x[i]))]
        for i in range(len(x))
    ]


def ref_agg(loss, m, mode: str) -> float:
    rows_sum, rows_n = [], []
    for i in range(len(loss)):
        s = n = 0.0
        for t in range(len(loss[i])):
            if m[i][t]:
                s += float(loss[i][t])
                n += 1
        rows_sum.append(s)
        rows_n.append(n)
    kept = [i for i in range(len(loss)) if rows_n[i] > 0]
    if mode == "token-mean":
        return sum(rows_sum) / sum(rows_n)
    if mode == "token-sum":
        return sum(rows_sum)
    if mode == "seq-mean-token-sum":
        return sum(rows_sum[i] for i in kept) / len(kept)
    if mode == "seq-mean-token-mean":
        return sum(rows_sum[i] / rows_n[i] for i in kept) / len(kept)
    if mode == "seq-mean-token-sum-norm":  # Dr. GRPO: 1 / (G L)
        return sum(rows_sum[i] for i in kept) / len(kept) / len(loss[0])
    raise AssertionError(mode)


def ref_groups(index) -> dict:
    groups: dict = {}
    for i, uid in enumerate(index):
        groups.setdefault(uid, []).append(i)
    return groups


def ref_scores(rewards) -> list[float]:
    return [sum(float(v) for v in row) for row in rewards]


def ref_broadcast(per_seq, m) -> list[list[float]]:
    return [[per_seq[i] if m[i][t] else 0.0 for t in range(len(m[i]))] for i in range(len(m))]


# ------------------------------------------------------------------ helpers in torch_functional


def test_masked_helpers():
    x = _randn(BS, T, seed=1)
    m = _mask()
    padded = x.clone()
    padded[m == 0] = float("inf")
    _close(masked_sum(padded, m), sum(float(x[i, t]) for i in range(BS) for t in range(T) if m[i, t]))
    _close(masked_sum(padded, m, dim=-1), [sum(float(x[i, t]) for t in range(LENGTHS[i])) for i in range(BS)])
    vals = [float(x[i, t]) for i in range(BS) for t in range(T) if m[i, t]]
    mean = sum(vals) / len(vals)
    _close(masked_var(x, m), sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
    _close(masked_var(x, m, unbiased=False), sum((v - mean) ** 2 for v in vals) / len(vals))
    _close(masked_whiten(x, m) * m, ref_whiten(x, m))
    _close(masked_mean(masked_whiten(x, m, shift_mean=False), m), mean, tol=1e-7)
    with pytest.raises(ValueError, match="single element"):
        masked_var(x, torch.tensor([[1.0] + [0.0] * (T - 1)] + [[0.0] * T] * (BS - 1), dtype=torch.float64))
    with pytest.raises(ValueError, match="no element"):
        masked_var(x, torch.zeros_like(x))


def test_entropy_from_logits_matches_loop_and_is_stable():
    logits = _randn(3, 4, 11, seed=2, scale=5.0)
    expected = torch.zeros(3, 4, dtype=torch.float64)
    for i in range(3):
        for t in range(4):
            z = [float(v) for v in logits[i, t]]
            zmax = max(z)
            denom = sum(math.exp(v - zmax) for v in z)
            expected[i, t] = -sum((math.exp(v - zmax) / denom) * math.log(math.exp(v - zmax) / denom) for v in z)
    _close(entropy_from_logits(logits), expected)
    big = logits.float() * 1000.0  # logits of order 1e4 in float32: finite, and shift-invariant
    h = entropy_from_logits(big)
    assert torch.isfinite(h).all()
    assert torch.allclose(entropy_from_logits(big + 5000.0), h, atol=1e-3)
    _close(entropy_from_logits(torch.zeros(2, 6, dtype=torch.float64)), [math.log(6)] * 2)


# ------------------------------------------------------------------ registries


def test_registries_and_unknown_names():
    estimators = {
        "gae": ca.compute_gae_advantage_return,
        "grpo": ca.compute_grpo_outcome_advantage,
        "grpo_passk": ca.compute_grpo_passk_outcome_advantage,
        "rloo": ca.compute_rloo_outcome_advantage,
        "reinforce_plus_plus": ca.compute_reinforce_plus_plus_outcome_advantage,
        "reinforce_plus_plus_baseline": ca.compute_reinforce_plus_plus_baseline_outcome_advantage,
        "remax": ca.compute_remax_outcome_advantage,
        "opo": ca.compute_opo_outcome_advantage,
        "gpg": ca.compute_gpg_outcome_advantage,
        "grpo_vectorized": ca.compute_grpo_vectorized_outcome_advantage,
        "rloo_vectorized": ca.compute_rloo_vectorized_outcome_advantage,
        "optimal_token_baseline": ca.compute_optimal_token_baseline_advantage,
        "tir_optimal_token_baseline": ca.compute_multi_turn_optimal_token_baseline_advantage,
        "gdpo": ca.compute_gdpo_outcome_advantage,
    }
    for name, fn in estimators.items():
        assert ca.get_adv_estimator_fn(name) is fn
        assert ca.get_adv_estimator_fn(ca.AdvantageEstimator(name)) is fn
    assert {e.value for e in ca.AdvantageEstimator} == set(estimators)
    assert ca.AdvantageEstimator.GRPO == "grpo"
    losses = {
        "vanilla": ca.compute_policy_loss_vanilla,
        "gspo": ca.compute_policy_loss_gspo,
        "gpg": ca.compute_policy_loss_gpg,
        "clip_cov": ca.compute_policy_loss_clip_cov,
        "kl_cov": ca.compute_policy_loss_kl_cov,
        "cispo": ca.compute_policy_loss_cispo,
        "sapo": ca.compute_policy_loss_sapo,
        "geo_mean": ca.compute_policy_loss_geo_mean,
        "dro": ca.compute_policy_loss_dro,
        "dppo_tv": ca.compute_policy_loss_dppo_tv,
        "dppo_kl": ca.compute_policy_loss_dppo_kl,
        "bypass_mode": ca.compute_policy_loss_bypass_mode,
    }
    for name, fn in losses.items():
        assert ca.get_policy_loss_fn(name) is fn
    assert set(ca.POLICY_LOSS_REGISTRY) == set(losses)
    with pytest.raises(ValueError, match="Unknown advantage estimator 'nope'.*grpo"):
        ca.get_adv_estimator_fn("nope")
    with pytest.raises(ValueError, match="'nope'.*vanilla"):
        ca.get_policy_loss_fn("nope")


def test_custom_registration():
    try:

        @ca.register_adv_est("test_custom_est")
        def custom(token_level_rewards, response_mask, **kwargs):
            return token_level_rewards, token_level_rewards

        assert ca.get_adv_estimator_fn("test_custom_est") is custom
        ca.register_adv_est("test_custom_est")(custom)  # same function again: fine
        with pytest.raises(ValueError, match="already registered"):
            ca.register_adv_est("test_custom_est")(lambda **kw: None)

        @ca.register_policy_loss("test_custom_loss")
        def custom_loss(
            old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, **kwargs
        ):
            return log_prob.sum(), {}

        assert ca.get_policy_loss_fn("test_custom_loss") is custom_loss
    finally:
        ca.ADV_ESTIMATOR_REGISTRY.pop("test_custom_est", None)
        ca.POLICY_LOSS_REGISTRY.pop("test_custom_loss", None)


def test_uniform_trainer_call_for_every_estimator():
    m = _mask()
    rewards = _randn(BS, T, seed=3) * m
    old_log_probs = -_randn(BS, T, seed=17).abs()
    kwargs = dict(  # what verl.trainer.ppo.advantage.compute_advantage passes
        token_level_rewards=rewards,
        response_mask=m,
        index=UIDS,
        values=_randn(BS, T, seed=4),
        reward_baselines=_randn(BS, seed=5),
        old_log_probs=old_log_probs,
        sum_pi_squared=torch.exp(2 * old_log_probs),
        rollout_is_weights=None,
        gamma=0.99,
        lam=0.95,
        norm_adv_by_std_in_grpo=True,
        config=OmegaConf.create(
            {"gamma": 0.99, "lam": 0.95, "norm_adv_by_std_in_grpo": True, "gdpo_reward_keys": ["acc", "fmt"]}
        ),
        batch={"token_level_rewards": rewards, "response_mask": m},
        non_tensor_batch={"uid": UIDS, "acc": np.arange(BS) % 2, "fmt": np.arange(BS) % 3},
    )
    for name in ca.AdvantageEstimator:
        adv, ret = ca.get_adv_estimator_fn(name)(**kwargs)
        assert adv.shape == ret.shape == (BS, T), name
        assert (adv[m == 0] == 0).all() and (ret[m == 0] == 0).all(), name
        assert torch.isfinite(adv).all() and torch.isfinite(ret).all(), name


# ------------------------------------------------------------------ advantage estimators


@pytest.mark.parametrize("holes", [False, True])
def test_gae_matches_loop(holes):
    m = _mask()
    if holes:  # multi-turn style: observation tokens inside the response are masked out
        m[0, 2] = m[0, 3] = 0.0
        m[4, 1] = 0.0
    rewards = _randn(BS, T, seed=6)
    values = _randn(BS, T, seed=7)
    gamma, lam = 0.9, 0.8
    adv, ret = ca.compute_gae_advantage_return(rewards, values, m, gamma=gamma, lam=lam)
    raw = [[0.0] * T for _ in range(BS)]
    exp_ret = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        valid = [t for t in range(T) if m[i, t]]
        next_value, gae = 0.0, 0.0
        for t in reversed(valid):
            delta = float(rewards[i, t]) + gamma * next_value - float(values[i, t])
            gae = delta + gamma * lam * gae
            raw[i][t] = gae
            exp_ret[i][t] = gae + float(values[i, t])
            next_value = float(values[i, t])
    _close(ret, exp_ret)
    _close(adv, ref_whiten(raw, m))


def test_gae_tiny_hand_case():
    # one response of 2 tokens, reward 1 on the last, values 0.5 / 0.25, gamma = lam = 1:
    # delta_1 = 1 - 0.25 = 0.75; delta_0 = 0 + 0.25 - 0.5 = -0.25; A_1 = 0.75, A_0 = 0.5; R = A + V = (1, 1)
    r = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)
    v = torch.tensor([[0.5, 0.25, 9.0]], dtype=torch.float64)
    m = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    adv, ret = ca.compute_gae_advantage_return(r, v, m, gamma=1.0, lam=1.0)
    _close(ret, [[1.0, 1.0, 0.0]])
    # whitened (0.5, 0.75): mean 0.625, unbiased var 0.03125
    s = math.sqrt(0.03125 + 1e-8)
    _close(adv, [[-0.125 / s, 0.125 / s, 0.0]])


def ref_grpo(rewards, m, index, eps, norm):
    scores = ref_scores(rewards)
    adv = [0.0] * len(scores)
    for members in ref_groups(index).values():
        n = len(members)
        if n == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(scores[j] for j in members) / n
            std = math.sqrt(sum((scores[j] - mean) ** 2 for j in members) / (n - 1))
        for j in members:
            adv[j] = (scores[j] - mean) / (std + eps) if norm else scores[j] - mean
    return ref_broadcast(adv, m)


@pytest.mark.parametrize("norm", [True, False])
def test_grpo_matches_loop(norm):
    m = _mask()
    rewards = _randn(BS, T, seed=8) * m
    index = np.array(list(UIDS[:-1]) + ["solo"], dtype=object)  # includes a group of one
    adv, ret = ca.compute_grpo_outcome_advantage(rewards, m, index, epsilon=1e-6, norm_adv_by_std_in_grpo=norm)
    expected = ref_grpo(rewards, m, index, 1e-6, norm)
    _close(adv, expected)
    _close(ret, expected)


def test_grpo_hand_case():
    # scores [1, 0, 1, 1]: mean 0.75, unbiased std 0.5 -> advantages (0.5, -1.5, 0.5, 0.5)
    m = _mask([3, 2, 1, 3], 3)
    r = _outcome_rewards([1.0, 0.0, 1.0, 1.0], [3, 2, 1, 3], 3)
    adv, _ = ca.compute_grpo_outcome_advantage(r, m, np.array(["q"] * 4, dtype=object), epsilon=0.0)
    _close(adv, [[0.5, 0.5, 0.5], [-1.5, -1.5, 0.0], [0.5, 0.0, 0.0], [0.5, 0.5, 0.5]])
    drgrpo, _ = ca.compute_grpo_outcome_advantage(
        r, m, np.array(["q"] * 4, dtype=object), norm_adv_by_std_in_grpo=False
    )
    _close(drgrpo[:, 0], [0.25, -0.75, 0.25, 0.25])
    # all-equal group: zero advantage; a single response keeps s / (1 + eps)
    same, _ = ca.compute_grpo_outcome_advantage(_outcome_rewards([1.0, 1.0], [2, 2], 2), _mask([2, 2], 2), ["x", "x"])
    _close(same, torch.zeros(2, 2))
    one, _ = ca.compute_grpo_outcome_advantage(_outcome_rewards([2.0], [1], 1), _mask([1], 1), ["x"], epsilon=0.0)
    _close(one, [[2.0]])


@pytest.mark.parametrize("norm", [True, False])
def test_grpo_passk_matches_loop(norm):
    m = _mask()
    rewards = _randn(BS, T, seed=9) * m
    adv, ret = ca.compute_grpo_passk_outcome_advantage(
        rewards, m, UIDS, epsilon=1e-6, config={"norm_adv_by_std_in_grpo": norm}
    )
    scores = ref_scores(rewards)
    expected = [0.0] * BS
    for members in ref_groups(UIDS).values():
        order = sorted(members, key=lambda j: scores[j], reverse=True)
        margin = scores[order[0]] - scores[order[1]]
        if norm:
            n = len(members)
            mean = sum(scores[j] for j in members) / n
            margin /= math.sqrt(sum((scores[j] - mean) ** 2 for j in members) / (n - 1)) + 1e-6
        expected[order[0]] = margin
    _close(adv, ref_broadcast(expected, m))
    _close(ret, adv)
    # the argument is used when no config is given
    adv2, _ = ca.compute_grpo_passk_outcome_advantage(rewards, m, UIDS, norm_adv_by_std_in_grpo=norm)
    _close(adv2, adv)
    with pytest.raises(ValueError, match="at least 2"):
        ca.compute_grpo_passk_outcome_advantage(rewards[:1], m[:1], ["a"])


def test_grpo_passk_hand_case():
    m = _mask([2, 2, 2], 2)
    r = _outcome_rewards([0.2, 1.0, 0.7], [2, 2, 2], 2)
    adv, _ = ca.compute_grpo_passk_outcome_advantage(r, m, ["g"] * 3, norm_adv_by_std_in_grpo=False)
    _close(adv, [[0.0, 0.0], [0.3, 0.3], [0.0, 0.0]])


def test_rloo_matches_loop_and_hand_case():
    m = _mask()
    rewards = _randn(BS, T, seed=10) * m
    index = np.array(list(UIDS[:-1]) + ["solo"], dtype=object)
    adv, ret = ca.compute_rloo_outcome_advantage(rewards, m, index)
    scores = ref_scores(rewards)
    expected = [0.0] * BS
    for members in ref_groups(index).values():
        for j in members:
            others = [scores[k] for k in members if k != j]
            expected[j] = scores[j] - sum(others) / len(others) if others else scores[j]
    _close(adv, ref_broadcast(expected, m))
    _close(ret, adv)
    # n = 2, scores (1, 0): each response's baseline is the other one's score
    adv2, _ = ca.compute_rloo_outcome_advantage(_outcome_rewards([1.0, 0.0], [2, 1], 2), _mask([2, 1], 2), ["p", "p"])
    _close(adv2, [[1.0, 1.0], [-1.0, 0.0]])


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_reinforce_plus_plus_matches_loop(gamma):
    m = _mask()
    rewards = _randn(BS, T, seed=11) * m
    adv, ret = ca.compute_reinforce_plus_plus_outcome_advantage(rewards, m, gamma=gamma)
    exp_ret = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        for t in range(LENGTHS[i]):
            exp_ret[i][t] = sum(gamma ** (s - t) * float(rewards[i, s]) for s in range(t, LENGTHS[i]))
    _close(ret, exp_ret)
    _close(adv, ref_whiten(exp_ret, m))
    # gamma from the config when not passed
    adv_cfg, ret_cfg = ca.compute_reinforce_plus_plus_outcome_advantage(rewards, m, config={"gamma": gamma})
    _close(ret_cfg, ret)
    _close(adv_cfg, adv)


def test_reinforce_plus_plus_baseline_matches_loop():
    m = _mask()
    rewards = _randn(BS, T, seed=12) * m
    index = np.array(list(UIDS[:-1]) + ["solo"], dtype=object)
    adv, ret = ca.compute_reinforce_plus_plus_baseline_outcome_advantage(rewards, m, index)
    scores = ref_scores(rewards)
    centred = [0.0] * BS
    for members in ref_groups(index).values():
        mean = sum(scores[j] for j in members) / len(members) if len(members) > 1 else 0.0
        for j in members:
            centred[j] = scores[j] - mean
    expected = ref_whiten(ref_broadcast(centred, m), m)
    _close(adv, expected)
    _close(ret, expected)


def test_remax_matches_loop():
    m = _mask()
    rewards = _randn(BS, T, seed=13) * m
    baselines = _randn(BS, seed=14)
    adv, ret = ca.compute_remax_outcome_advantage(rewards, baselines, m)
    exp_ret = [[0.0] * T for _ in range(BS)]
    exp_adv = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        for t in range(LENGTHS[i]):
            exp_ret[i][t] = sum(float(rewards[i, s]) for s in range(t, LENGTHS[i]))
            exp_adv[i][t] = exp_ret[i][t] - float(baselines[i])
    _close(ret, exp_ret)
    _close(adv, exp_adv)


def test_opo_matches_loop():
    m = _mask()
    rewards = _randn(BS, T, seed=15) * m
    index = np.array(list(UIDS[:-1]) + ["solo"], dtype=object)
    adv, ret = ca.compute_opo_outcome_advantage(rewards, m, index)
    scores = ref_scores(rewards)
    expected = [0.0] * BS
    for members in ref_groups(index).values():
        if len(members) == 1:
            baseline = 0.0
        else:
            baseline = sum(LENGTHS[j] * scores[j] for j in members) / sum(LENGTHS[j] for j in members)
        for j in members:
            expected[j] = scores[j] - baseline
    _close(adv, ref_broadcast(expected, m))
    _close(ret, adv)


def test_gpg_estimator_matches_loop():
    m = _mask()
    rewards = _outcome_rewards([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    adv, _ = ca.compute_gpg_outcome_advantage(rewards, m, UIDS)
    scores = ref_scores(rewards)
    alpha = BS / sum(1 for s in scores if s != 0)
    expected = [0.0] * BS
    for members in ref_groups(UIDS).values():
        mean = sum(scores[j] for j in members) / len(members)
        for j in members:
            expected[j] = alpha * (scores[j] - mean)
    _close(adv, ref_broadcast(expected, m))


def test_estimators_keep_float32_and_do_not_touch_inputs():
    m = _mask().float()
    rewards = (_randn(BS, T, seed=16) * _mask()).float()
    before = rewards.clone()
    adv, _ = ca.compute_grpo_outcome_advantage(rewards, m, UIDS)
    assert adv.dtype == torch.float32
    assert torch.equal(rewards, before)
    expected = ref_grpo(rewards.double(), m, UIDS, 1e-6, True)
    _close(adv.double(), expected, tol=1e-5)


# ------------------------------------------------------------------ KL


def ref_kl(lp: float, ref: float, kind: str) -> float:
    if kind == "kl":
        return lp - ref
    if kind == "abs":
        return abs(lp - ref)
    if kind == "mse":
        return 0.5 * (lp - ref) ** 2
    if kind == "low_var_kl":
        d = min(max(ref - lp, -20.0), 20.0)
        return min(max(math.exp(d) - d - 1.0, -10.0), 10.0)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind,alias", [("kl", "k1"), ("abs", "abs"), ("mse", "k2"), ("low_var_kl", "k3")])
def test_kl_estimators_match_loop(kind, alias):
    lp = _randn(BS, T, seed=17)
    ref = _randn(BS, T, seed=18)
    lp[0, 0], ref[0, 0] = 0.0, -30.0  # exercises the clamps of low_var_kl
    expected = [[ref_kl(float(lp[i, t]), float(ref[i, t]), kind) for t in range(T)] for i in range(BS)]
    _close(ca.kl_penalty(lp, ref, kind), expected)
    _close(ca.kl_penalty(lp, ref, alias), expected)


def test_kl_straight_through_and_errors():
    lp = _randn(3, 4, seed=19).requires_grad_(True)
    ref = _randn(3, 4, seed=20)
    value = ca.kl_penalty(lp, ref, "k3+")
    _close(value.detach(), ca.kl_penalty(lp.detach(), ref, "k3"))
    value.sum().backward()
    _close(lp.grad, (lp - ref).detach())  # d/dlp of k2 = 0.5 (lp - ref)^2
    with pytest.raises(NotImplementedError, match="full"):
        ca.kl_penalty(lp, ref, "full")
    with pytest.raises(ValueError, match="low_var_kl"):
        ca.kl_penalty(lp, ref, "nope")


def test_kl_controllers():
    fixed = ca.get_kl_controller({"type": "fixed", "kl_coef": 0.05})
    assert isinstance(fixed, ca.FixedKLController) and fixed.value == 0.05
    fixed.update(current_kl=10.0, n_steps=100)
    assert fixed.value == 0.05
    ctrl = ca.get_kl_controller(
        OmegaConf.create({"type": "adaptive", "kl_coef": 0.1, "target_kl": 0.2, "horizon": 100})
    )
    assert isinstance(ctrl, ca.AdaptiveKLController)
    beta = 0.1
    for current_kl, n_steps in [(0.3, 10), (1.0, 20), (0.0, 5), (0.19, 50)]:
        ctrl.update(current_kl, n_steps)
        error = min(max(current_kl / 0.2 - 1.0, -0.2), 0.2)
        beta *= 1.0 + error * n_steps / 100
        assert ctrl.value == pytest.approx(beta, rel=1e-12)
    with pytest.raises(ValueError, match="horizon"):
        ca.get_kl_controller({"type": "adaptive", "kl_coef": 0.1, "target_kl": 0.2, "horizon": 0})
    with pytest.raises(ValueError, match="fixed"):
        ca.get_kl_controller({"type": "pid", "kl_coef": 0.1})


@pytest.mark.parametrize("kind", ["kl", "low_var_kl"])
def test_apply_kl_penalty_matches_loop(kind):
    m = _mask()
    scores = _randn(BS, T, seed=21) * m
    old = _randn(BS, T, seed=22)
    ref = _randn(BS, T, seed=23)
    ctrl = ca.AdaptiveKLController(init_kl_coef=0.2, target_kl=0.5, horizon=50)
    rewards, metrics = ca.apply_kl_penalty(scores, old, ref, m, ctrl, kl_penalty=kind)
    expected = [[0.0] * T for _ in range(BS)]
    seq_kls = []
    for i in range(BS):
        total = 0.0
        for t in range(T):
            kl = ref_kl(float(old[i, t]), float(ref[i, t]), kind) if m[i, t] else 0.0
            expected[i][t] = float(scores[i, t]) - 0.2 * kl
            total += kl
        seq_kls.append(total / LENGTHS[i])
    current_kl = sum(seq_kls) / BS
    _close(rewards, expected)
    assert metrics["actor/reward_kl_penalty"] == pytest.approx(current_kl, rel=1e-12)
    assert metrics["actor/reward_kl_penalty_coeff"] == 0.2
    error = min(max(current_kl / 0.5 - 1.0, -0.2), 0.2)
    assert ctrl.value == pytest.approx(0.2 * (1.0 + error * BS / 50), rel=1e-12)


# ------------------------------------------------------------------ aggregation


@pytest.mark.parametrize("mode", AGG_MODES)
def test_agg_loss_matches_loop(mode):
    lengths = LENGTHS[:-1] + [0]  # one row without any response token
    m = _mask(lengths)
    loss = _randn(BS, T, seed=24)
    _close(ca.agg_loss(loss, m, mode), ref_agg(loss, m, mode))


def test_agg_loss_hand_case_and_error():
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    _close(ca.agg_loss(loss, m, "token-mean"), 10.0 / 4)
    _close(ca.agg_loss(loss, m, "seq-mean-token-sum"), (6.0 + 4.0) / 2)
    _close(ca.agg_loss(loss, m, "seq-mean-token-mean"), (2.0 + 4.0) / 2)
    _close(ca.agg_loss(loss, m, "seq-mean-token-sum-norm"), 10.0 / 2 / 3)  # 1 / (G L): 2 sequences, L = 3
    _close(ca.agg_loss(loss, m, "token-sum"), 10.0)
    with pytest.raises(ValueError, match="token-mean"):
        ca.agg_loss(loss, m, "sum")


# ------------------------------------------------------------------ policy losses


def _pg_inputs(seed: int = 30):
    m = _mask()
    old = _randn(BS, T, seed=seed, scale=0.5) - 1.0
    lp = old + _randn(BS, T, seed=seed + 1, scale=0.4)  # ratios spread well past 1 +- 0.2
    adv = _randn(BS, T, seed=seed + 2)
    return old, lp, adv, m


def ref_vanilla(old, lp, adv, m, low, high, c):
    losses = [[0.0] * T for _ in range(BS)]
    n_clip = n_dual = n = 0
    kl = 0.0
    for i in range(BS):
        for t in range(T):
            d = min(max(float(lp[i, t]) - float(old[i, t]), -20.0), 20.0)
            r, a = math.exp(d), float(adv[i, t])
            l1, l2 = -a * r, -a * min(max(r, 1 - low), 1 + high)
            loss = max(l1, l2)
            clipped = l2 > l1
            dual = False
            if a < 0:
                dual = loss > -a * c
                loss = min(loss, -a * c)
            losses[i][t] = loss
            if m[i, t]:
                n += 1
                n_clip += clipped
                n_dual += dual
                kl += -d
    return losses, n_clip / n, kl / n, n_dual / n


@pytest.mark.parametrize("mode", AGG_MODES)
def test_vanilla_matches_loop(mode):
    old, lp, adv, m = _pg_inputs()
    lp[1, 0], adv[1, 0] = old[1, 0] + 2.0, -1.5  # ratio e^2 > c with A < 0: the dual clip applies
    lp[2, 1], adv[2, 1] = old[2, 1] + 1.5, -0.5
    config = {"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0}
    loss, metrics = ca.compute_policy_loss_vanilla(old, lp, adv, m, mode, config)
    losses, e_clip, e_kl, e_dual = ref_vanilla(old, lp, adv, m, 0.2, 0.28, 3.0)
    _close(loss, ref_agg(losses, m, mode))
    assert set(metrics) == {"actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"}
    assert all(type(v) is float for v in metrics.values())
    _close(metrics["actor/pg_clipfrac"], e_clip)
    _close(metrics["actor/ppo_kl"], e_kl)
    _close(metrics["actor/pg_clipfrac_lower"], e_dual)
    assert 0 < e_clip < 1 and e_dual > 0  # both branches exercised by these inputs
    # verl's deprecated plain-argument form keeps its four outputs
    legacy = ca.compute_policy_loss(old, lp, adv, m, cliprange=0.2, cliprange_high=0.28, loss_agg_mode=mode)
    for a, b in zip(legacy, (loss, e_clip, e_kl, e_dual)):
        _close(a, b)


def test_vanilla_hand_cases_and_config_forms():
    # token 0: A=+1, r=1.5 -> clipped at 1.2: loss -1.2      token 1: A=-1, r=e^2=7.39 -> dual clip: loss 3
    # token 2: A=+1, r=1.0 -> loss -1                         token 3: A=-1, r=0.5 -> clipped at 0.8: loss 0.8
    old = torch.zeros(1, 4, dtype=torch.float64)
    lp = torch.tensor([[math.log(1.5), 2.0, 0.0, math.log(0.5)]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]], dtype=torch.float64)
    m = torch.ones(1, 4, dtype=torch.float64)
    loss, metrics = ca.compute_policy_loss_vanilla(old, lp, adv, m, config={})
    _close(loss, (-1.2 + 3.0 - 1.0 + 0.8) / 4)
    _close(metrics["actor/pg_clipfrac"], 2 / 4)
    _close(metrics["actor/pg_clipfrac_lower"], 1 / 4)
    _close(metrics["actor/ppo_kl"], -(math.log(1.5) + 2.0 + math.log(0.5)) / 4)
    # DictConfig, None values fall back to clip_ratio, and attribute objects behave the same
    cfg = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": None, "clip_ratio_high": None})
    _close(ca.compute_policy_loss_vanilla(old, lp, adv, m, config=cfg)[0], loss)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        ca.compute_policy_loss_vanilla(old, lp, adv, m, config={"clip_ratio_c": 1.0})


def test_vanilla_gradient_zero_when_clipped():
    old = torch.zeros(1, 2, dtype=torch.float64)
    lp = torch.tensor([[math.log(1.5), 0.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    loss = ca.compute_policy_loss_vanilla(old, lp, adv, torch.ones(1, 2, dtype=torch.float64))[0]
    loss.backward()
    _close(lp.grad, [[0.0, -0.5]])  # clipped token: no gradient; unclipped: -A r / N


def test_truncated_importance_sampling():
    old, lp, adv, m = _pg_inputs()
    rollout = old + _randn(BS, T, seed=40, scale=0.5)
    cfg = {"clip_ratio": 0.2}
    losses, *_ = ref_vanilla(old, lp, adv, m, 0.2, 0.2, 3.0)
    caps = [[min(math.exp(float(old[i, t]) - float(rollout[i, t])), 1.5) for t in range(T)] for i in range(BS)]
    weights = ca.truncated_is_weights(old, rollout, 1.5)
    _close(weights, caps)
    weighted = [[losses[i][t] * caps[i][t] for t in range(T)] for i in range(BS)]
    _close(
        ca.compute_policy_loss_vanilla(old, lp, adv, m, config=cfg, rollout_is_weights=weights)[0],
        ref_agg(weighted, m, "token-mean"),
    )
    # no cap, or no rollout log-probs: no weights, plain PPO
    assert ca.truncated_is_weights(old, rollout, -1) is None and ca.truncated_is_weights(old, None, 1.5) is None
    _close(ca.compute_policy_loss_vanilla(old, lp, adv, m, config=cfg)[0], ref_agg(losses, m, "token-mean"))


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_gspo_matches_loop_with_gradient(mode):
    old, lp, adv, m = _pg_inputs(seed=50)
    lp = lp.clone().requires_grad_(True)
    cfg = {"clip_ratio": 0.2, "clip_ratio_low": 0.3, "clip_ratio_high": 0.4}
    loss, metrics = ca.compute_policy_loss_gspo(old, lp, adv, m, mode, cfg)
    lp_ = lp.detach()
    losses = [[0.0] * T for _ in range(BS)]
    grads = [[0.0] * T for _ in range(BS)]
    n_clip = n = 0
    kl = 0.0
    for i in range(BS):
        seq_ratio = math.exp(
            min(sum(float(lp_[i, t]) - float(old[i, t]) for t in range(LENGTHS[i])) / LENGTHS[i], 10.0)
        )
        for t in range(T):
            a = float(adv[i, t])
            l1, l2 = -a * seq_ratio, -a * min(max(seq_ratio, 0.7), 1.4)
            losses[i][t] = max(l1, l2)
            if m[i, t]:
                n += 1
                n_clip += l2 > l1
                kl += float(old[i, t]) - float(lp_[i, t])
                weight = 1.0 / (LENGTHS[i] * BS) if mode == "seq-mean-token-mean" else 1.0 / sum(LENGTHS)
                grads[i][t] = 0.0 if l2 > l1 else -a * seq_ratio * weight
    _close(loss, ref_agg(losses, m, mode))
    _close(metrics["actor/pg_clipfrac"], n_clip / n)
    _close(metrics["actor/ppo_kl"], kl / n)
    _close(metrics["actor/pg_clipfrac_lower"], 0.0)
    assert 0 < n_clip < n
    loss.backward()
    _close(lp.grad, grads)  # each token's gradient is sg(s_i) * grad logp_t


def test_gspo_default_agg_is_sequence_level():
    old, lp, adv, m = _pg_inputs(seed=51)
    default = ca.compute_policy_loss_gspo(old, lp, adv, m, config={})[0]
    _close(default, ca.compute_policy_loss_gspo(old, lp, adv, m, "seq-mean-token-mean", {})[0])


@pytest.mark.parametrize("mode", AGG_MODES)
def test_gpg_policy_loss_matches_loop(mode):
    old, lp, adv, m = _pg_inputs(seed=60)
    loss, metrics = ca.compute_policy_loss_gpg(old, lp, adv, m, mode)
    losses = [[-float(lp[i, t]) * float(adv[i, t]) for t in range(T)] for i in range(BS)]
    _close(loss, ref_agg(losses, m, mode))
    assert metrics == {}  # as verl: GPG has no ratio to report on


def ref_cov(adv, lp, m):
    valid = [(i, t) for i in range(BS) for t in range(T) if m[i, t]]
    mean_a = sum(float(adv[i, t]) for i, t in valid) / len(valid)
    mean_lp = sum(float(lp[i, t]) for i, t in valid) / len(valid)
    return {(i, t): (float(adv[i, t]) - mean_a) * (float(lp[i, t]) - mean_lp) for i, t in valid}


def test_clip_cov_matches_loop_when_every_candidate_is_picked():
    old, lp, adv, m = _pg_inputs(seed=70)
    adv = adv * 3.0  # widen the covariances so several land in (lb, ub)
    cfg = {"clip_ratio": 0.2, "policy_loss": {"clip_cov_ratio": 1.0, "clip_cov_lb": 0.5, "clip_cov_ub": 5.0}}
    loss, metrics = ca.compute_policy_loss_clip_cov(old, lp, adv, m, "token-mean", cfg)
    cov = ref_cov(adv, lp, m)
    losses = [[0.0] * T for _ in range(BS)]
    n_picked, kl = 0, 0.0
    for i in range(BS):
        for t in range(T):
            r, a = math.exp(float(lp[i, t]) - float(old[i, t])), float(adv[i, t])
            l1, l2 = -a * r, -a * min(max(r, 0.8), 1.2)
            picked = m[i, t] and not (l2 > l1) and 0.5 < cov[(i, t)] < 5.0
            losses[i][t] = 0.0 if picked else max(l1, l2)
            n_picked += bool(picked)
            if m[i, t]:
                kl += float(old[i, t]) - float(lp[i, t])
    n = sum(LENGTHS)
    assert 0 < n_picked < n
    _close(loss, ref_agg(losses, m, "token-mean"))
    assert set(metrics) == {"actor/pg_clipfrac", "actor/ppo_kl"}
    _close(metrics["actor/pg_clipfrac"], n_picked / n)
    _close(metrics["actor/ppo_kl"], kl / n)


def test_clip_cov_picks_k_random_candidates_reproducibly():
    old, lp, adv, m = _pg_inputs(seed=71)
    adv = adv * 3.0
    cfg = {"clip_ratio": 0.2, "clip_cov_ratio": 0.05, "clip_cov_lb": 0.0, "clip_cov_ub": 100.0}  # top-level keys
    torch.manual_seed(0)
    first = ca.compute_policy_loss_clip_cov(old, lp, adv, m, "token-mean", cfg)
    torch.manual_seed(0)
    second = ca.compute_policy_loss_clip_cov(old, lp, adv, m, "token-mean", cfg)
    assert torch.equal(first[0], second[0]) and first[1] == second[1]
    n = sum(LENGTHS)
    k = max(int(0.05 * n), 1)
    _close(first[1]["actor/pg_clipfrac"], k / n)


@pytest.mark.parametrize("ratio", [0.1, 0.3])
def test_kl_cov_matches_loop(ratio):
    old, lp, adv, m = _pg_inputs(seed=80)
    cfg = {"policy_loss": {"kl_cov_ratio": ratio, "ppo_kl_coef": 0.7}}
    loss, metrics = ca.compute_policy_loss_kl_cov(old, lp, adv, m, "token-mean", cfg)
    cov = ref_cov(adv, lp, m)
    k = max(1, int(len(cov) * ratio))
    top = set(sorted(cov, key=lambda key: cov[key], reverse=True)[:k])
    losses = [[0.0] * T for _ in range(BS)]
    abs_kl = 0.0
    for i in range(BS):
        for t in range(T):
            d = float(lp[i, t]) - float(old[i, t])
            losses[i][t] = -float(adv[i, t]) * math.exp(d) + (0.7 * abs(d) if (i, t) in top else 0.0)
            if m[i, t]:
                abs_kl += abs(d)
    _close(loss, ref_agg(losses, m, "token-mean"))
    assert set(metrics) == {"actor/ppo_kl"}
    _close(metrics["actor/ppo_kl"], abs_kl / len(cov))


@pytest.mark.parametrize("mode", AGG_MODES)
def test_cispo_matches_loop_with_gradient(mode):
    old, lp, adv, m = _pg_inputs(seed=90)
    lp = lp.clone().requires_grad_(True)
    cfg = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}
    loss, metrics = ca.compute_policy_loss_cispo(old, lp, adv, m, mode, cfg)
    lp_ = lp.detach()
    losses = [[0.0] * T for _ in range(BS)]
    grads = [[0.0] * T for _ in range(BS)]
    n_low = n_high = 0
    kl = 0.0
    n = sum(LENGTHS)
    n_seq = BS
    for i in range(BS):
        for t in range(T):
            d = float(lp_[i, t]) - float(old[i, t])
            r, a = math.exp(d), float(adv[i, t])
            w = min(max(r, 0.8), 1.28)
            losses[i][t] = -w * a * float(lp_[i, t])
            if m[i, t]:
                n_low += r < 0.8
                n_high += r > 1.28
                kl -= d
                scale = {
                    "token-mean": 1.0 / n,
                    "token-sum": 1.0,
                    "seq-mean-token-sum": 1.0 / n_seq,
                    "seq-mean-token-mean": 1.0 / (n_seq * LENGTHS[i]),
                    "seq-mean-token-sum-norm": 1.0 / (n_seq * T),
                }[mode]
                grads[i][t] = -w * a * scale  # the weight is a constant: gradient flows through log_prob only
    _close(loss, ref_agg(losses, m, mode))
    _close(metrics["actor/pg_clipfrac"], (n_low + n_high) / n)
    _close(metrics["actor/pg_clipfrac_lower"], n_low / n)
    _close(metrics["actor/ppo_kl"], kl / n)
    assert n_low > 0 and n_high > 0
    loss.backward()
    _close(lp.grad, grads)


def test_policy_losses_take_the_uniform_call():
    old, lp, adv, m = _pg_inputs(seed=95)
    cfg = OmegaConf.create(
        {
            "clip_ratio": 0.2,
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.28,
            "clip_ratio_c": 3.0,
            "policy_loss": {
                "loss_mode": "vanilla",
                "clip_cov_ratio": 0.0002,
                "kl_cov_ratio": 0.0002,
                "dro_beta": 0.05,
                "rollout_correction": {"loss_type": "ppo_clip"},  # bypass_mode's settings
            },
        }
    )
    for name in sorted(ca.POLICY_LOSS_REGISTRY):
        for weights in (None, torch.full_like(lp, 0.5)):
            loss, metrics = ca.get_policy_loss_fn(name)(  # verl's call, as the actor makes it
                old_log_prob=old,
                log_prob=lp,
                advantages=adv,
                response_mask=m,
                loss_agg_mode="token-mean",
                config=cfg,
                rollout_is_weights=weights,
            )
            assert loss.dim() == 0 and torch.isfinite(loss), name
            # bypass_mode also reports the rollout_corr/ metrics its loss measured, under the decoupled stage's names
            assert all(k.startswith(("actor/", "rollout_corr/")) and math.isfinite(v) for k, v in metrics.items())


# ------------------------------------------------------------------ value / entropy losses, DAPO


@pytest.mark.parametrize("mode", AGG_MODES)
def test_value_loss_matches_loop(mode):
    m = _mask()
    vpreds, returns, values = _randn(BS, T, seed=100), _randn(BS, T, seed=101), _randn(BS, T, seed=102)
    vf_loss, vf_clipfrac = ca.compute_value_loss(vpreds, returns, values, m, cliprange_value=0.3, loss_agg_mode=mode)
    losses = [[0.0] * T for _ in range(BS)]
    n_clip = 0
    for i in range(BS):
        for t in range(T):
            v, ret, old = float(vpreds[i, t]), float(returns[i, t]), float(values[i, t])
            v_clip = min(max(v, old - 0.3), old + 0.3)
            l1, l2 = (v - ret) ** 2, (v_clip - ret) ** 2
            losses[i][t] = max(l1, l2)
            n_clip += bool(m[i, t]) and l2 > l1
    _close(vf_loss, 0.5 * ref_agg(losses, m, mode))
    _close(vf_clipfrac, n_clip / sum(LENGTHS))
    assert n_clip > 0


def test_value_loss_hand_case():
    # v = 2, old = 0, clip 0.5 -> v_clip = 0.5; R = 1: (2-1)^2 = 1 vs (0.5-1)^2 = 0.25 -> 0.5 * 1, not clipped
    one = torch.ones(1, 1, dtype=torch.float64)
    loss, frac = ca.compute_value_loss(2 * one, one, 0 * one, one, 0.5)
    _close(loss, 0.5)
    _close(frac, 0.0)
    # R = 3: (2-3)^2 = 1 vs (0.5-3)^2 = 6.25 -> 0.5 * 6.25, clipped
    loss, frac = ca.compute_value_loss(2 * one, 3 * one, 0 * one, one, 0.5)
    _close(loss, 3.125)
    _close(frac, 1.0)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_entropy_loss_matches_loop(mode):
    m = _mask()
    logits = _randn(BS, T, 5, seed=110, scale=3.0)
    ent = [[0.0] * T for _ in range(BS)]
    for i in range(BS):
        for t in range(T):
            z = [float(v) for v in logits[i, t]]
            zmax = max(z)
            p = [math.exp(v - zmax) for v in z]
            total = sum(p)
            ent[i][t] = -sum((q / total) * math.log(q / total) for q in p)
    _close(ca.compute_entropy_loss(logits, m, mode), ref_agg(ent, m, mode))


def test_overlong_penalty():
    lengths = torch.tensor([10, 16, 17, 18, 20])
    penalty = ca.compute_overlong_penalty(lengths, max_response_length=20, overlong_buffer_len=4, penalty_factor=1.0)
    assert penalty.dtype == torch.get_default_dtype()
    _close(penalty, [0.0, 0.0, -0.25, -0.5, -1.0])
    expected = []
    for n in [3, 12, 13, 15]:
        exceed = n - (16 - 4)
        expected.append(min(-exceed / 4 * 0.5, 0.0))
    _close(
        ca.compute_overlong_penalty(torch.tensor([3.0, 12.0, 13.0, 15.0], dtype=torch.float64), 16, 4, 0.5), expected
    )
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        ca.compute_overlong_penalty(lengths, 20, 0, 1.0)


@pytest.mark.parametrize("mode", ca.LOSS_AGG_MODES)
@pytest.mark.parametrize("dp", [1, 2])
def test_micro_batch_weights_reproduce_the_whole_mini_batch_loss(mode, dp):
    """Summing weighted micro-batch losses on each rank, then averaging over ranks (what FSDP does to gradients),
    gives agg_loss of the whole mini-batch: micro-batch size and worker count never change the update."""
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(12, 7, generator=g, dtype=torch.float64)
    mask = (torch.rand(12, 7, generator=g) > 0.3).to(torch.float64)
    mask[5] = 0  # a row without tokens
    whole = ca.agg_loss(loss, mask, mode)
    counts = ca.loss_normalizer_counts(mask)  # in a worker: all-reduced over ranks
    total = 0.0
    for rank_rows in torch.arange(12).chunk(dp):
        rank_sum = 0.0
        for micro in rank_rows.split(4 if dp == 1 else 2):
            w = ca.micro_batch_loss_weight(mask[micro], counts, mode, dp)
            rank_sum += float(ca.agg_loss(loss[micro], mask[micro], mode)) * w
        total += rank_sum / dp
    assert total == pytest.approx(float(whole), rel=1e-12)


def test_loss_normalizer_counts_hand_case():
    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0]])
    assert ca.loss_normalizer_counts(mask).tolist() == [3.0, 2.0, 3.0]
