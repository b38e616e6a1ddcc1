"""The collapse guard: a signal far below the run's own best is reported once, in one line, with the values; with
trainer.rollback_on_collapse the policy of the best validation comes back with a smaller learning rate. The plateau
rule (trainer.lr_plateau) does the same when the held-out metric stops improving. CPU runs here are bit-exact, so the
rolled-back weights are compared with torch.equal."""

from __future__ import annotations

import os
import re

import pytest
import torch

from verl.trainer.config.ppo_trainer import CollapseGuardConfig, LrPlateauConfig
from verl.trainer.ppo.collapse_guard import CollapseGuard, PlateauRule
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
    "actor_rollout_ref.actor.trust_region.enable=false",  # a fixed rate (the built-in task's recipe steers it)
    "trainer.total_training_steps=3",
    "trainer.test_freq=1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
    "trainer.resume_mode=disable",
]


def _fit(overrides: list[str], capsys):
    """Build the SMALL run with ``overrides``, keep its starting weights, fit it: (trainer, start, stdout)."""
    from verl.trainer.main_ppo import build_trainer
    from verl.utils.config import load_config

    trainer = build_trainer(load_config("ppo_trainer", [*SMALL, *overrides]))
    start = [p.detach().clone() for p in trainer.actor_rollout_wg.actor_module.parameters()]
    trainer.fit()
    return trainer, start, capsys.readouterr().out


@pytest.mark.slow
def test_a_destroyed_policy_is_reported_and_rolled_back(tmp_path, capsys):
    trainer, start, out = _fit([f"trainer.default_local_dir={tmp_path}", "trainer.rollback_on_collapse=true"], capsys)
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


@pytest.mark.slow
def test_without_rollback_a_collapse_is_said_once(tmp_path, capsys):
    trainer, _, out = _fit([f"trainer.default_local_dir={tmp_path}"], capsys)
    assert out.count("COLLAPSE at step") == 1 and "rolled back" not in out
    assert trainer.history["collapse/count"][-1] == (3, 1.0) and "collapse/rollbacks" not in trainer.history
    assert not os.path.exists(tmp_path / "best_val")


def test_the_plateau_rule_cuts_after_patience_validations_without_a_new_best():
    rule = PlateauRule(LrPlateauConfig(enable=True, patience=2, threshold=0.01))
    # 0.405 does not beat 0.40 by more than 0.01: stale; 0.39 stale again: cut (and the count starts over)
    accuracies = [0.30, 0.40, 0.405, 0.39, 0.45, 0.44, 0.44, 0.43]
    actions = [rule.observe(acc) for acc in accuracies]
    assert actions == ["", "best", "", "cut", "best", "", "cut", ""]  # the first value is a start, not a new best
    assert rule.best == 0.45


@pytest.mark.parametrize(
    ("key", "value", "needs"),
    [
        ("patience", 0, ">= 1"),
        ("factor", 1.0, "(0, 1)"),
        ("min_scale", 0.0, "(0, 1]"),
        ("initial_scale", 0.01, "within [min_scale (0.05), 1]"),
        ("growth", 0.5, ">= 1"),
    ],
)
def test_a_bad_plateau_setting_names_its_key(key, value, needs):
    with pytest.raises(
        ValueError, match=re.escape(f"trainer.lr_plateau.{key}={value}: must be") + ".*" + re.escape(needs)
    ):
        LrPlateauConfig(**{key: value})


PLATEAU = [
    "trainer.collapse_guard.val_drop=1.0",  # no collapse: only the plateau rule acts
    "trainer.lr_plateau.enable=true",
    "trainer.lr_plateau.patience=1",
    "trainer.lr_plateau.min_scale=0.25",
]


@pytest.mark.slow
def test_a_plateau_rolls_back_to_the_best_validation_and_cuts_the_rate_down_to_its_floor(tmp_path, capsys):
    trainer, start, out = _fit([f"trainer.default_local_dir={tmp_path}", *PLATEAU], capsys)
    history = trainer.history
    accuracy = dict(history["val-core/acc"])
    assert all(accuracy[s] <= accuracy[0] for s in (1, 2, 3))  # lr 0.3 only makes the warm start worse
    assert "COLLAPSE" not in out
    assert "PLATEAU at step 1: held-out val-core/acc has not beaten its best" in out
    assert "rolled back to the best validation's policy, learning rate x0.5" in out
    assert "PLATEAU at step 3" in out and "the learning rate stays at x0.25 (trainer.lr_plateau.min_scale)" in out
    assert history["actor/lr"] == [(1, pytest.approx(0.3)), (2, pytest.approx(0.15)), (3, pytest.approx(0.075))]
    assert history["plateau/cuts"] == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 2.0)]
    assert history["collapse/lr_scale"][-1] == (3, 0.25) and history["collapse/rollbacks"][-1] == (3, 2.0)
    # the floor reached, step 3's policy is kept: it differs from the step-0 one the two cuts went back to
    assert any(not torch.equal(p, q) for p, q in zip(trainer.actor_rollout_wg.actor_module.parameters(), start))


@pytest.mark.slow
def test_a_resumed_run_keeps_its_cuts_and_its_best(tmp_path, capsys):
    """The checkpoint of a step holds that step's rollback and the watch's state: resumed at step 2, the plateau
    rule still knows its best (step 0) and its scale (x0.25, the floor), so step 3 does not cut from x1 again."""
    from verl.trainer.main_ppo import build_trainer
    from verl.utils.config import load_config

    overrides = [*SMALL, f"trainer.default_local_dir={tmp_path}", *PLATEAU, "trainer.save_freq=1"]
    first = build_trainer(load_config("ppo_trainer", [*overrides, "trainer.total_training_steps=2"]))
    start = [p.detach().clone() for p in first.actor_rollout_wg.actor_module.parameters()]
    first.fit()
    capsys.readouterr()
    resumed = build_trainer(load_config("ppo_trainer", [*overrides, "trainer.resume_mode=auto"]))
    resumed.init()  # loads global_step_2: saved after step 2's rollback, so it holds the step-0 policy
    for p, q in zip(resumed.actor_rollout_wg.actor_module.parameters(), start):
        assert torch.equal(p, q)
    resumed.fit()
    out = capsys.readouterr().out
    assert "resumed from" in out and "global_step_2" in out
    assert "PLATEAU at step 3" in out and "the learning rate stays at x0.25" in out
    history = resumed.history
    assert history["actor/lr"] == [(3, pytest.approx(0.075))]
    assert history["plateau/cuts"] == [(3, 2.0)] and history["collapse/lr_scale"] == [(3, 0.25)]


class _RecordingGroup:
    """A role's worker group as the watch drives it: the scales it was set to, the checkpoints it saved and loaded."""

    def __init__(self):
        self.scales, self.loaded = [], []

    def scale_lr(self, scale):
        self.scales.append(scale)

    def save_checkpoint(self, path):
        os.makedirs(path, exist_ok=True)

    def load_checkpoint(self, path):
        self.loaded.append(path)


def test_the_bold_driver_starts_low_raises_the_rate_on_each_new_best_and_cuts_on_a_plateau(tmp_path):
    from types import SimpleNamespace

    from verl.trainer.config.ppo_trainer import TrainerConfig
    from verl.trainer.ppo.collapse_guard import CollapseWatch

    plateau = LrPlateauConfig(enable=True, patience=1, initial_scale=0.125, growth=2.0)
    actor = _RecordingGroup()
    trainer = SimpleNamespace(
        config=SimpleNamespace(trainer=TrainerConfig(lr_plateau=plateau)),
        checkpoints=SimpleNamespace(root=str(tmp_path)),
        _checkpoint_roles=lambda: {"actor": actor},
    )
    watch = CollapseWatch(trainer)
    scales = []
    for step, acc in enumerate([0.30, 0.40, 0.50, 0.60, 0.70, 0.65]):
        watch.after(step, {"val-core/acc": acc})
        scales.append(watch.lr_scale)
    # the first check sets x0.125 on the schedule; three new bests: x0.25, x0.5, x1 (not above); 0.65: back, x0.5
    assert scales == [0.125, 0.25, 0.5, 1.0, 1.0, 0.5]
    assert actor.scales == [0.125, 0.25, 0.5, 1.0, 0.5]
    assert actor.loaded == [os.path.join(str(tmp_path), "best_val", "actor")]  # the step-4 policy, 0.70
    state = watch.state_dict()
    again = CollapseWatch(trainer)
    again.load_state_dict(state)
    assert again.lr_scale == 0.5 and again.scale_applied and again.plateau.best == 0.70 and again.cuts == 1


@pytest.mark.slow
def test_a_plateau_rollback_restores_lora_adapters_exactly(tmp_path, capsys):
    """With LoRA the best validation's checkpoint is the adapter alone: the rollback brings those weights back bit
    for bit (CPU), and the frozen base is never touched."""
    overrides = [f"trainer.default_local_dir={tmp_path}", "actor_rollout_ref.model.lora_rank=8", *PLATEAU]
    trainer, start, out = _fit([*overrides, "trainer.lr_plateau.min_scale=0.05"], capsys)
    assert out.count("rolled back to the best validation's policy") == 3  # every step undid the warm start
    assert trainer.history["actor/lr"] == [(1, pytest.approx(0.3)), (2, pytest.approx(0.15)), (3, pytest.approx(0.075))]
    params = list(trainer.actor_rollout_wg.actor_module.parameters())
    assert sum(p.requires_grad for p in params) > 0 and all(torch.equal(p, q) for p, q in zip(params, start))
