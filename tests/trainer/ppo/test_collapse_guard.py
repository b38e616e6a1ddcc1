"""The collapse guard: a signal far below the run's own best is reported once, in one line, with the values; with
trainer.rollback_on_collapse the policy of the best validation comes back with a smaller learning rate."""

from __future__ import annotations

import os

import pytest
import torch

from verl.trainer.config.ppo_trainer import CollapseGuardConfig
from verl.trainer.ppo.collapse_guard import CollapseGuard
from verl.utils.optim import build_adamw, scale_lr_schedule


def test_a_held_out_drop_is_reported_once_with_its_values_and_again_after_recovery():
    guard = CollapseGuard(CollapseGuardConfig(val_drop=0.15))
    reports = []
    for step, acc in enumerate([0.50, 0.60, 0.50, 0.40, 0.30, 0.55, 0.30]):
        metrics = {"val-core/acc": acc}
        reports.append(guard.observe(step, metrics))
        assert metrics["collapse/detected"] == float(reports[-1] is not None)
    assert [r is not None for r in reports] == [False, False, False, True, False, False, True]
    assert reports[3] == "COLLAPSE at step 3: held-out val-core/acc 0.4 is 0.2 below its best 0.6 (step 1)"
    assert guard.count == 2


def test_training_reward_over_a_window_and_entropy():
    guard = CollapseGuard(CollapseGuardConfig(train_drop=0.2, window=3, entropy_ratio=0.1))
    scores = [0.5, 0.6, 0.7, 0.0, 0.6, 0.7, 0.1, 0.1, 0.1]  # one bad batch (step 3) is not a collapse, the run is
    found = [guard.observe(s, {"critic/score/mean": x, "actor/entropy": 1.0}) for s, x in enumerate(scores)]
    assert [s for s, r in enumerate(found) if r] == [7]  # windows: 0.6 (best), 0.43, 0.43, 0.43, 0.47, 0.3, 0.1
    assert "training reward (mean of 3 steps) 0.3 is 0.3 below its best 0.6" in found[7]
    entropy = CollapseGuard(CollapseGuardConfig(entropy_ratio=0.1))
    assert entropy.observe(1, {"actor/entropy": 2.0}) is None and entropy.observe(2, {"actor/entropy": 0.3}) is None
    assert "entropy 0.1 is below 0.1 x its first value 2" in entropy.observe(3, {"actor/entropy": 0.1})
    off = CollapseGuard(CollapseGuardConfig())  # entropy_ratio 0: entropy is not watched
    assert off.observe(1, {"actor/entropy": 2.0}) is None and off.observe(2, {"actor/entropy": 1e-6}) is None


def test_scaling_the_schedule_keeps_its_step_and_is_against_the_configured_rate():
    param = torch.nn.Parameter(torch.zeros(2))
    optimizer, schedule = build_adamw(
        [param], 1e-2, (0.9, 0.99), 0.0, total_steps=10, warmup_steps=2, schedule="cosine"
    )
    for _ in range(4):
        optimizer.step()
        schedule.step()
    before = optimizer.param_groups[0]["lr"]
    scale_lr_schedule(schedule, 0.5)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(before * 0.5)
    scale_lr_schedule(schedule, 0.5)  # the same scale again changes nothing
    assert optimizer.param_groups[0]["lr"] == pytest.approx(before * 0.5)
    optimizer.step()
    schedule.step()
    reference_opt, reference = build_adamw(
        [torch.nn.Parameter(torch.zeros(2))], 5e-3, (0.9, 0.99), 0.0, 10, 2, "cosine"
    )
    for _ in range(5):
        reference_opt.step()
        reference.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(reference_opt.param_groups[0]["lr"])


SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=32",
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.optim.lr=0.3",  # far too large: the policy is destroyed in a step or two
    "trainer.total_training_steps=3",
    "trainer.test_freq=1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
    "trainer.resume_mode=disable",
]


def test_a_destroyed_policy_is_reported_and_rolled_back(tmp_path, capsys):
    from verl.trainer.main_ppo import build_trainer
    from verl.utils.config import load_config

    overrides = [*SMALL, f"trainer.default_local_dir={tmp_path}", "trainer.rollback_on_collapse=true"]
    trainer = build_trainer(load_config("ppo_trainer", overrides))
    start = [p.detach().clone() for p in trainer.actor_rollout_wg.actor_module.parameters()]
    trainer.fit()
    out = capsys.readouterr().out
    history = trainer.history
    accuracy = dict(history["val-core/acc"])
    assert accuracy[0] > 0.1 and min(accuracy[s] for s in (1, 2, 3)) < accuracy[0] - 0.15  # it did collapse
    assert "COLLAPSE at step 1: held-out val-core/acc" in out
    assert "rolled back to the best validation's policy, learning rate x0.5" in out
    assert os.path.isdir(tmp_path / "best_val" / "actor")  # the step-0 policy, the best validation
    # still collapsed at each next validation: back again, the rate halved each time
    assert history["actor/lr"] == [(1, pytest.approx(0.3)), (2, pytest.approx(0.15)), (3, pytest.approx(0.075))]
    assert history["collapse/rollbacks"][-1] == (3, 3.0) and history["collapse/count"][-1] == (3, 3.0)
    for p, q in zip(trainer.actor_rollout_wg.actor_module.parameters(), start):  # rolled back after the last step
        assert torch.equal(p, q)


def test_without_rollback_a_collapse_is_said_once(tmp_path, capsys):
    from verl.trainer.main_ppo import build_trainer
    from verl.utils.config import load_config

    trainer = build_trainer(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path}"]))
    trainer.fit()
    out = capsys.readouterr().out
    assert out.count("COLLAPSE at step") == 1 and "rolled back" not in out
    assert trainer.history["collapse/count"][-1] == (3, 1.0) and "collapse/rollbacks" not in trainer.history
    assert not os.path.exists(tmp_path / "best_val")
