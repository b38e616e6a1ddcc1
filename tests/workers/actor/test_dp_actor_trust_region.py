"""actor.trust_region in the update: the drift each mini-batch measures, the early stop, the learning-rate multiplier
applied on top of the schedule, and off = verl's fixed learning rate, update for update."""

import copy

import pytest
import torch
from test_fast_paths import actor_config, make_batch

from verl import core_algos
from verl.workers.actor.dp_actor import DataParallelPPOActor


@pytest.fixture(scope="module")
def model():
    from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer

    torch.manual_seed(0)
    return build_tiny_model(build_tokenizer(), TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=128))


@pytest.fixture(scope="module")
def data(model):
    batch = make_batch(seed=21, bs=12)
    batch.batch["old_log_probs"], _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(batch)
    return batch


def _update(model, data, lr: float, **region):
    """One update over two mini-batches of 6 rows (AdamW at ``lr``), trust region settings ``region`` (the multiplier
    starting at 1 unless given)."""
    region = {"initial_lr_ratio": 1.0, **region}
    module = copy.deepcopy(model)
    cfg = actor_config(ppo_mini_batch_size=6, ppo_micro_batch_size_per_gpu=6, use_kl_loss=False, trust_region=region)
    actor = DataParallelPPOActor(cfg, module, torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=0.0))
    metrics = actor.update_policy(data)
    return module, metrics, actor


def _same(a, b) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.slow
def test_drift_metric_is_the_kl_of_the_second_mini_batch_after_the_first_step(model, data):
    module, metrics, _ = _update(model, data, 1e-3, target_kl=1e9, early_stop_ratio=0.0)
    # recompute: the policy after the first mini-batch's step, on the second mini-batch's rows
    first, _, _ = _update(model, data[:6], 1e-3, enable=False)
    second = data[6:]
    new_lp, _ = DataParallelPPOActor(actor_config(), first).compute_log_prob(second)
    total, count = core_algos.policy_drift_kl_sum(second.batch["old_log_probs"], new_lp, second.batch["response_mask"])
    assert metrics["actor/policy_drift_kl"] == [pytest.approx((total / count).item(), rel=1e-4)]
    assert metrics["actor/trust_region_stop"] == [0.0]


def test_off_is_the_fixed_learning_rate_update(model, data):
    off, m_off, _ = _update(model, data, 1e-3, enable=False)
    # ceiling at optim.lr and no early stop: with the multiplier at 1 the updates are identical
    on, m_on, actor = _update(model, data, 1e-3, target_kl=1e9, early_stop_ratio=0.0)
    assert actor.lr_scale == 1.0
    assert _same(off, on)
    assert m_off["actor/policy_drift_kl"] == m_on["actor/policy_drift_kl"]  # measured either way
    assert "actor/lr_scale" not in m_off


def test_early_stop_skips_the_remaining_mini_batches(model, data):
    stopped, metrics, actor = _update(model, data, 1e-2, target_kl=1e-9, early_stop_ratio=2.0, lr_factor=2.0)
    first_only, _, _ = _update(model, data[:6], 1e-2, enable=False)
    assert _same(stopped, first_only)  # the second step was not taken
    assert metrics["actor/trust_region_stop"] == [1.0]
    assert actor.lr_scale == 0.5  # and the next step starts smaller


def test_multiplier_rises_by_the_increase_factor_and_falls_by_the_factor(model, data):
    """Far under target the measured mini-batch raises the multiplier by lr_increase_factor; far over, it falls by
    lr_factor: the rate climbs slowly and is cut fast."""
    _, _, rose = _update(
        model,
        data,
        1e-3,
        target_kl=1e9,
        early_stop_ratio=0.0,
        initial_lr_ratio=0.1,
        lr_factor=2.0,
        lr_increase_factor=1.25,
    )
    assert rose.lr_scale == pytest.approx(0.125)
    _, _, fell = _update(
        model, data, 1e-2, target_kl=1e-9, early_stop_ratio=0.0, lr_factor=2.0, lr_increase_factor=1.25
    )
    assert fell.lr_scale == 0.5


def test_multiplier_scales_the_step_on_top_of_the_schedule(model, data):
    """A far-over-target drift halves the multiplier before the second step: the same as AdamW at half the rate
    for that step (AdamW's update is proportional to its rate at a given state)."""
    halved, _, actor = _update(model, data, 1e-2, target_kl=1e-9, early_stop_ratio=0.0, lr_factor=2.0)
    assert actor.lr_scale == 0.5
    module = copy.deepcopy(model)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-2, weight_decay=0.0)
    cfg = actor_config(ppo_mini_batch_size=6, ppo_micro_batch_size_per_gpu=6, use_kl_loss=False)
    cfg.trust_region.enable = False
    plain = DataParallelPPOActor(cfg, module, opt)
    plain.update_policy(data[:6])
    for group in opt.param_groups:
        group["lr"] = 5e-3
    plain.update_policy(data[6:])
    for p, q in zip(halved.parameters(), module.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)
    assert opt.param_groups[0]["lr"] == 5e-3  # (the actor restores the scheduled rate after its scaled step)


def test_off_under_verl_defaults_and_on_in_the_quickstart_recipe():
    from verl.utils.config import load_config, omega_conf_to_dataclass
    from verl.workers.config import FSDPActorConfig, trust_region_enabled

    def built(*overrides):
        section = load_config("ppo_trainer", list(overrides)).actor_rollout_ref.actor
        return trust_region_enabled(omega_conf_to_dataclass(section, FSDPActorConfig))

    assert built() is True  # the bare job: the quickstart recipe
    assert built("recipe=none") is False  # verl's fixed rate
    assert built("actor_rollout_ref.model.path=/models/mine") is False  # a run of one's own: verl's defaults
    assert built("actor_rollout_ref.model.path=/models/mine", "actor_rollout_ref.actor.trust_region.enable=true")
    assert built("actor_rollout_ref.actor.trust_region.enable=false") is False


def test_the_first_steps_start_at_the_initial_ratio_and_grow_while_the_drift_is_small(model, data):
    _, metrics, actor = _update(model, data, 1e-6, initial_lr_ratio=0.1, target_kl=1.0)
    assert actor.lr_scale == pytest.approx(0.11)  # one measured mini-batch far below target / 2: x lr_increase_factor
    assert metrics["actor/lr_scale"] == [pytest.approx(0.11)]
