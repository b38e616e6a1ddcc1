"""`BaseCheckpointManager` retention: a limit of k never leaves the run without a checkpoint while saving."""

import os

import pytest

from verl.utils.checkpoint.checkpoint_manager import (
    BaseCheckpointManager,
    find_latest_ckpt_path,
    get_checkpoint_tracker_filename,
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
    manager = BaseCheckpointManager(None, None, checkpoint_config={"save_contents": ["model", "hf_model"]})
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
