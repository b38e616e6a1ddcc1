"""verl's bypass mode (``algorithm.rollout_correction.bypass_mode``) in the trainer: the step skips the old-log-prob
pass and takes the sampler's log-probs as the old ones, the actor's loss becomes the bypass loss, and the update it
makes equals the update on recomputed old log-probs up to float rounding (the HF sampler and the trainer run the same
float32 weights). Same seed, same run, bit for bit, on CPU."""

from __future__ import annotations

import pytest
import torch

from verl.trainer.main_ppo import build_trainer
from verl.utils.config import load_config

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=32",  # room for the answer: rewards vary within groups, so the updates are not 0
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_epochs=2",  # the second epoch updates off the old log-probs
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.actor.optim.lr=1e-3",
    "actor_rollout_ref.actor.trust_region.enable=false",  # a fixed rate: the two runs' steps are comparable
    "actor_rollout_ref.rollout.calculate_log_probs=true",
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
    "trainer.resume_mode=disable",
]
BYPASS = "algorithm.rollout_correction.bypass_mode=true"


def run(tmp_path, *extra, steps: int = 2):
    trainer = build_trainer(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path}", *extra]))
    worker = trainer.actor_rollout_wg
    calls = []
    original = worker.compute_log_prob
    worker.compute_log_prob = lambda data: calls.append(1) or original(data)
    history = [trainer.train_step() for _ in range(steps)]
    trainer.close()
    return trainer, history, len(calls)


@pytest.mark.slow
def test_bypass_skips_the_pass_and_gives_the_decoupled_step(tmp_path):
    bypass, bypass_history, bypass_calls = run(tmp_path / "bypass", BYPASS)
    decoupled, decoupled_history, decoupled_calls = run(tmp_path / "decoupled")
    assert (bypass_calls, decoupled_calls) == (0, 2)
    policy_loss = bypass.config.actor_rollout_ref.actor.policy_loss
    assert policy_loss.loss_mode == "bypass_mode" and policy_loss.rollout_correction["loss_type"] == "ppo_clip"
    for ours, theirs in zip(bypass_history, decoupled_history):
        assert ours["timing_s/old_log_prob"] < 0.01  # no pass: only the copy of the sampler's log-probs
        assert ours["actor/grad_norm"] > 0 and 0 < ours["critic/score/mean"] < 1  # a real update
        for key in ("actor/pg_loss", "actor/pg_clipfrac", "critic/score/mean"):
            assert ours[key] == pytest.approx(theirs[key], abs=1e-4), key
        # the entropy comes from the update's first mini-batch, before its step: here the whole batch
        assert ours["actor/entropy"] == pytest.approx(theirs["actor/entropy"], abs=1e-4)
        # the sampler and the trainer agree (the decoupled stage measures it); the bypass loss measures the moving
        # policy against the sampler under the same name, averaged over both epochs: the second one has moved
        assert abs(theirs["rollout_corr/kl"]) < 1e-5 and ours["rollout_corr/kl"] > 1e-3
    for p, q in zip(
        bypass.actor_rollout_wg.actor_module.parameters(), decoupled.actor_rollout_wg.actor_module.parameters()
    ):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=1e-3)


@pytest.mark.slow
def test_bypass_is_bit_for_bit_reproducible_on_cpu(tmp_path):
    first, history_a, _ = run(tmp_path / "a", BYPASS, steps=1)
    second, history_b, _ = run(tmp_path / "b", BYPASS, steps=1)
    assert history_a[0]["actor/pg_loss"] == history_b[0]["actor/pg_loss"]
    for p, q in zip(
        first.actor_rollout_wg.actor_module.parameters(), second.actor_rollout_wg.actor_module.parameters()
    ):
        assert torch.equal(p, q)


@pytest.mark.slow
def test_bypass_reinforce_with_sequence_weights_and_rejection_trains(tmp_path):
    _, history, calls = run(
        tmp_path,
        BYPASS,
        "algorithm.rollout_correction.loss_type=reinforce",
        "algorithm.rollout_correction.rollout_is=sequence",
        "algorithm.rollout_correction.rollout_rs=seq_max_k3",
        "algorithm.rollout_correction.rollout_rs_threshold=0.5",
    )
    assert calls == 0
    for metrics in history:
        assert torch.isfinite(torch.tensor(metrics["actor/pg_loss"]))
        # sequence weights min(prod rho, 2) against the moving policy (1 in the first epoch, then apart)
        assert 0 < metrics["rollout_corr/rollout_is_mean"] <= 2.0
        assert 0 <= metrics["rollout_corr/rollout_rs_masked_fraction"] <= 1
        assert metrics["actor/grad_norm"] > 0


def test_bypass_without_the_sampler_log_probs_is_an_error_naming_the_key(tmp_path):
    from verl.utils.config import ConfigError

    with pytest.raises(ConfigError, match=r"bypass_mode=true takes the sampler's log-probs.*calculate_log_probs=true"):
        run(tmp_path, BYPASS, "actor_rollout_ref.rollout.calculate_log_probs=false", steps=0)
