"""The actor's side of rollout correction: the trainer's ``rollout_is_weights`` multiply each token's policy loss
(the same update as the actor's own ``tis_imp_ratio_cap`` for token-level weights, and both at once is an error);
an on-policy update keeps its pre-step log-probs in the batch's row order for the trainer's mismatch metrics."""

import copy
import math

import pytest
import torch
from test_fast_paths import _one_update, actor_config, make_batch

from verl.core_algos.rollout_correction import compute_rollout_correction_weights
from verl.core_algos.rollout_ratios import rollout_log_ratio
from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
from verl.workers.actor.dp_actor import DataParallelPPOActor

COMMON = {"use_kl_loss": False}


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_tiny_model(build_tokenizer(), TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=128))


def _step_size(updated, original) -> float:
    return sum((p - q).abs().sum().item() for p, q in zip(updated.parameters(), original.parameters()))


def _with_old_log_probs(model, seed: int):
    data = make_batch(seed=seed)
    old, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    data.batch["old_log_probs"] = old
    return data


@pytest.mark.slow
def test_rollout_is_weights_scale_each_token_loss(model):
    data = _with_old_log_probs(model, seed=11)
    common = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=4, **COMMON)
    plain, _ = _one_update(model, data, **common)
    data.batch["rollout_is_weights"] = torch.full_like(data.batch["old_log_probs"], 0.25)
    weighted, _ = _one_update(model, data, **common)
    assert _step_size(weighted, model) == pytest.approx(0.25 * _step_size(plain, model), rel=1e-4)


@pytest.mark.slow
def test_token_weights_from_the_trainer_equal_the_actors_own_truncated_weights(model):
    """rollout_is=token with rollout_is_threshold=C is the weight tis_imp_ratio_cap=C computes in the actor."""
    data = _with_old_log_probs(model, seed=12)
    g = torch.Generator().manual_seed(0)
    data.batch["rollout_log_probs"] = data.batch["old_log_probs"] + 0.8 * torch.randn(
        data.batch["old_log_probs"].shape, generator=g
    )
    common = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=3, **COMMON)
    by_actor, m_actor = _one_update(model, data, tis_imp_ratio_cap=1.5, **common)
    b = data.batch
    lr = rollout_log_ratio(b["old_log_probs"], b["rollout_log_probs"], b["response_mask"])
    b["rollout_is_weights"], _ = compute_rollout_correction_weights(lr, b["response_mask"], "token", 1.5)
    by_trainer, m_trainer = _one_update(model, data, **common)
    for p, q in zip(by_actor.parameters(), by_trainer.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)
    assert m_trainer["actor/pg_loss"] == pytest.approx(m_actor["actor/pg_loss"], abs=1e-6)
    with pytest.raises(ValueError, match="tis_imp_ratio_cap > 0 and algorithm.rollout_correction.rollout_is"):
        _one_update(model, data, tis_imp_ratio_cap=1.5, **common)


@pytest.mark.parametrize("dynamic", [False, True])
def test_on_policy_update_returns_its_old_log_probs_in_batch_order(model, dynamic):
    data = make_batch(seed=13)  # no old_log_probs: the update is the old-log-prob pass
    expected, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    budget = {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 40} if dynamic else {}
    cfg = actor_config(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=3, shuffle=True, **budget)
    module = copy.deepcopy(model)
    actor = DataParallelPPOActor(cfg, module, torch.optim.SGD(module.parameters(), lr=0.0))
    actor.update_policy(data)
    mask = data.batch["response_mask"].bool()
    torch.testing.assert_close(actor.on_policy_log_probs[mask], expected[mask], atol=1e-5, rtol=1e-5)
    data.batch["old_log_probs"] = expected
    actor.update_policy(data)
    assert actor.on_policy_log_probs is None  # given old log-probs: nothing to return
    assert math.isfinite(float(expected[mask].sum()))
