"""Checkpoint retention and auto-resume bookkeeping of a run directory (`verl.trainer.ppo.checkpointing`), with a stub
worker group (no model)."""

import logging
import os

import pytest
from omegaconf import OmegaConf

from verl.trainer.ppo.checkpointing import RunCheckpoints


class _StubWorkers:
    def save_checkpoint(self, path):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "weights"), "w") as f:
            f.write("w")


class _Run:
    """A run at ``global_steps`` that saves ``actor/`` and a controller state the way the trainer does."""

    def __init__(self, config):
        self.config, self.global_steps = config, 0
        self.checkpoints = RunCheckpoints(config.trainer)

    def save(self):
        state = {"global_steps": self.global_steps, "dataloader": {"epoch": 0, "batch_idx": 0}}
        return self.checkpoints.save(self.global_steps, {"actor": _StubWorkers()}, state)

    def find_resume_dir(self):
        return self.checkpoints.find_resume_dir()


def _trainer(root, keep_actor=None, keep_critic=None, resume_mode="auto"):
    config = OmegaConf.create(
        {
            "trainer": {
                "default_local_dir": str(root),
                "max_actor_ckpt_to_keep": keep_actor,
                "max_critic_ckpt_to_keep": keep_critic,
                "resume_mode": resume_mode,
                "resume_from_path": None,
            }
        }
    )
    return _Run(config)


def _steps(root):
    return sorted(int(d.split("_")[-1]) for d in os.listdir(root) if d.startswith("global_step_"))


def test_keeps_the_newest_n(tmp_path):
    t = _trainer(tmp_path, keep_actor=2)
    for step in (1, 2, 3, 4):
        t.global_steps = step
        t.save()
    assert _steps(tmp_path) == [3, 4]
    assert t.find_resume_dir() == str(tmp_path / "global_step_4")


def test_critic_limit_alone_prunes(tmp_path):
    t = _trainer(tmp_path, keep_critic=1)
    for step in (1, 2):
        t.global_steps = step
        t.save()
    assert _steps(tmp_path) == [2]


def test_later_checkpoints_of_an_abandoned_run_never_displace_the_new_one(tmp_path, caplog):
    # a longer earlier run left global_step_100; this one was started over (resume_mode=disable)
    (tmp_path / "global_step_100" / "actor").mkdir(parents=True)
    t = _trainer(tmp_path, keep_actor=1)
    with caplog.at_level(logging.WARNING):
        for step in (5, 10):
            t.global_steps = step
            saved = t.save()
            assert os.path.isdir(saved)
    assert _steps(tmp_path) == [10, 100]  # step 5 pruned, the stale 100 left alone
    assert "later steps [100]" in caplog.text
    assert t.find_resume_dir() == str(tmp_path / "global_step_10")  # auto-resume follows the latest save


def test_latest_pointing_at_a_missing_directory_is_an_error_not_a_fresh_start(tmp_path):
    t = _trainer(tmp_path)
    t.global_steps = 3
    t.save()
    os.rename(tmp_path / "global_step_3", tmp_path / "moved")
    with pytest.raises(FileNotFoundError, match="names step '3'.*resume_mode"):
        t.find_resume_dir()


def test_resume_path_given_as_the_run_directory_says_which_to_give(tmp_path):
    t = _trainer(tmp_path)
    t.global_steps = 2
    t.save()
    t.config.trainer.resume_mode = "resume_path"
    t.config.trainer.resume_from_path = str(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"looks like a run directory.*global_step_2.*resume_mode=auto"):
        t.find_resume_dir()
    t.config.trainer.resume_from_path = str(tmp_path / "global_step_2")
    assert t.find_resume_dir() == str(tmp_path / "global_step_2")


def test_a_reservation_about_to_end_saves_between_save_freq_steps(tmp_path, monkeypatch):
    """With save_freq=10, steps 1..3 save only when the announced expiry leaves no room for another step and a save
    (the step duration is measured between the per-step checks)."""
    import time

    import verl.trainer.ppo.checkpointing as checkpointing

    trainer = OmegaConf.create({"default_local_dir": str(tmp_path), "save_freq": 10, "esi_redundant_time": 0})
    checks = RunCheckpoints(trainer)
    now = {"mono": 0.0}
    monkeypatch.setattr(checkpointing.time, "monotonic", lambda: now["mono"])
    monkeypatch.setattr(time, "time", lambda: 5000.0)
    monkeypatch.setenv("MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP", "5100")  # 100 s left
    assert not checks.due(1, 100)  # no step measured yet
    now["mono"] = 30.0
    assert not checks.due(2, 100)  # a 30 s step: 30 + 60 s of save fit in 100 s
    now["mono"] = 75.0
    assert checks.due(3, 100) and checks.max_steps_duration == 45.0  # 45 + 60 > 100: save now
    monkeypatch.delenv("MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP")
    assert not checks.due(4, 100) and checks.due(10, 100) and checks.due(100, 100)
    assert not RunCheckpoints(OmegaConf.create({**trainer, "save_freq": -1})).due(100, 100)
