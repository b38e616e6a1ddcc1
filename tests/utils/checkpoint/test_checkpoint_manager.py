"""`BaseCheckpointManager` retention: a limit of k never leaves the run without a checkpoint while saving."""

import os

import pytest

from verl.trainer.config.config import CheckpointConfig
from verl.utils.checkpoint.checkpoint_manager import (
    BaseCheckpointManager,
    find_latest_ckpt_path,
    get_checkpoint_tracker_filename,
    should_save_ckpt_esi,
)


def _save(manager, root, step, keep):
    manager.ensure_checkpoint_capacity(keep)
    path = root / f"global_step_{step}"
    path.mkdir()
    manager.register_checkpoint(str(path), keep)
    return str(path)


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_keeps_the_newest_and_never_deletes_before_the_new_one_exists(tmp_path, keep):
    manager = BaseCheckpointManager(model=None, optimizer=None)
    saved = [_save(manager, tmp_path, step, keep) for step in (10, 20, 30, 40)]
    assert manager.previous_saved_paths == saved[-keep:]
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(p) for p in saved[-keep:]]
    manager.ensure_checkpoint_capacity(keep)  # before the next save: at least one checkpoint remains
    assert len(manager.previous_saved_paths) == max(keep - 1, 1)


def test_no_limit_keeps_everything_and_contents_follow_the_config(tmp_path):
    manager = BaseCheckpointManager(None, None, checkpoint_config=CheckpointConfig(save_contents=["model", "hf_model"]))
    for step in (1, 2, 3):
        _save(manager, tmp_path, step, None)
    assert len(os.listdir(tmp_path)) == 3
    assert manager.should_save_hf_model and not manager.should_save_optimizer and manager.should_load_optimizer
    with pytest.raises(NotImplementedError, match="must implement save_checkpoint"):
        manager.save_checkpoint(str(tmp_path))


def test_latest_checkpoint_follows_the_pointer_file(tmp_path):
    assert find_latest_ckpt_path(str(tmp_path)) is None
    (tmp_path / "global_step_7").mkdir()
    with open(get_checkpoint_tracker_filename(str(tmp_path)), "w") as f:
        f.write("7")
    assert find_latest_ckpt_path(str(tmp_path)) == str(tmp_path / "global_step_7")
    (tmp_path / "global_step_7").rmdir()
    assert find_latest_ckpt_path(str(tmp_path)) is None


def test_rng_state_round_trip():
    import random

    import torch

    state = BaseCheckpointManager.get_rng_state()
    a = (random.random(), torch.rand(1).item())
    BaseCheckpointManager.load_rng_state(state)
    assert (random.random(), torch.rand(1).item()) == a


# ---------------------------------------------------------------------------------------- should_save_ckpt_esi
MLP, AWS = "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP", "SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"


@pytest.fixture
def clock(monkeypatch):
    """A frozen wall clock at t=1000 s and no announced expiry."""
    import time

    monkeypatch.setattr(time, "time", lambda: 1000.0)
    monkeypatch.delenv(MLP, raising=False)
    monkeypatch.delenv(AWS, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("var", "expires_at", "step_s", "margin_s", "expected"),
    [
        (MLP, 1100.0, 30, 0, False),  # 100 s left, 30 + 60 needed: another step fits
        (MLP, 1090.0, 30, 0, True),  # 90 s left, a step (30) and a save (60) need 90
        (MLP, 1091.0, 30, 0, False),  # one second more than needed: the next step still fits
        (MLP, 1120.0, 30, 30, True),  # the margin counts: 120 <= 30 + 60 + 30
        (MLP, 990.0, 30, 0, False),  # already expired: too late, nothing to gain
        (MLP, 1010.0, 0, 0, False),  # no step timed yet
        (AWS, 1089.0, 30, 0, True),  # SageMaker: strictly less than needed
        (AWS, 1090.0, 30, 0, False),
        (AWS, 990.0, 30, 0, True),  # SageMaker counts a passed expiry as close, as verl does
    ],
)
def test_should_save_ckpt_esi_against_hand_computed_margins(clock, var, expires_at, step_s, margin_s, expected):
    clock.setenv(var, str(expires_at) if var == MLP else str(int(expires_at)))
    assert should_save_ckpt_esi(step_s, redundant_time=margin_s) is expected


def test_should_save_ckpt_esi_without_or_with_an_unreadable_expiry(clock):
    assert should_save_ckpt_esi(30) is False
    clock.setenv(MLP, "soon")
    assert should_save_ckpt_esi(30) is False
    clock.delenv(MLP)
    clock.setenv(AWS, "soon")
    assert should_save_ckpt_esi(30) is False
