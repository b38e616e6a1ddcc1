"""The on-policy skip of the old-log-prob pass (``actor.skip_old_log_prob_on_policy``): taken exactly when one epoch
runs over one mini-batch, and the step it takes equals the step with the explicit pass."""

from __future__ import annotations

import pytest
import torch

from verl.trainer.main_ppo import build_trainer
from verl.utils.config import load_config

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.actor.use_kl_loss=true",
    "actor_rollout_ref.actor.optim.lr=1e-3",
    "trainer.total_training_steps=1",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
    "trainer.resume_mode=disable",
]


def one_step(tmp_path, *extra):
    trainer = build_trainer(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path}", *extra]))
    worker = trainer.actor_rollout_wg
    calls = []
    original = worker.compute_log_prob
    worker.compute_log_prob = lambda data: calls.append(1) or original(data)
    metrics = trainer.train_step()
    trainer.close()
    return metrics, worker.actor_module, len(calls)


@pytest.mark.slow
def test_skipped_pass_gives_the_same_step(tmp_path):
    skipped, module_a, calls_a = one_step(tmp_path / "a")
    explicit, module_b, calls_b = one_step(tmp_path / "b", "actor_rollout_ref.actor.skip_old_log_prob_on_policy=false")
    assert (calls_a, calls_b) == (0, 1)
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/entropy", "critic/score/mean", "response_length/mean"):
        assert skipped[key] == pytest.approx(explicit[key], abs=1e-5), key
    for p, q in zip(module_a.parameters(), module_b.parameters()):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [
        ["actor_rollout_ref.actor.ppo_mini_batch_size=2"],  # two mini-batches: the second is off-policy
        ["actor_rollout_ref.actor.ppo_epochs=2"],
        ["algorithm.use_kl_in_reward=true"],  # the reward's KL reads old_log_probs before the update
        [  # rollout correction weighs and rejects by old_log_probs before the update
            "algorithm.rollout_correction.rollout_rs=token_k3",
            "algorithm.rollout_correction.rollout_rs_threshold=1.0",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
        ],
    ],
)
def test_not_skipped_when_not_provably_on_policy(tmp_path, extra):
    _, _, calls = one_step(tmp_path, *extra)
    assert calls == 1


@pytest.mark.slow
def test_skipped_pass_still_measures_the_rollout_mismatch(tmp_path):
    """The on-policy update returns the log-probs it used as old ones: the same mismatch metrics as the pass."""
    skipped, _, _ = one_step(tmp_path / "a")
    explicit, _, _ = one_step(tmp_path / "b", "actor_rollout_ref.actor.skip_old_log_prob_on_policy=false")
    keys = [k for k in explicit if k.startswith(("training/rollout", "rollout_corr/"))]
    assert len(keys) == 18
    for key in keys:
        assert skipped[key] == pytest.approx(explicit[key], rel=1e-4, abs=1e-6), key
