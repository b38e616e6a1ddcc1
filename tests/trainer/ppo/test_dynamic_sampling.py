"""DAPO dynamic sampling (`algorithm.filter_groups`) in the controller, with stub workers (no model): a partial
batch keeps whole groups that split over the data-parallel workers, and generation batches whose reward extra
columns differ still merge."""

import math

import pytest
import torch
from controller_stubs import R, make_controller


def _config(n=2, bsz=4, max_gen=1, backend="local", world=1):
    return {
        "algorithm": {
            "adv_estimator": "grpo",
            "filter_groups": {"enable": True, "metric": "seq_reward", "max_num_gen_batches": max_gen},
        },
        "actor_rollout_ref": {"rollout": {"n": n}},
        "reward_model": {"overlong_buffer": {"enable": False}},
        "data": {"train_batch_size": bsz},
        "trainer": {"backend": backend, "n_gpus_per_node": world, "nnodes": 1},
    }


def _rewards(per_row):
    def reward_fn(data, return_dict=True):
        scores = torch.zeros(len(data), R)
        scores[:, -1] = torch.tensor(per_row, dtype=torch.float32)
        return {"reward_tensor": scores}

    return reward_fn


def test_partial_batch_keeps_whole_groups_that_split_over_workers():
    # 4 prompts x 2 samples; group 0 scores (0, 0): filtered; 3 groups vary; only 1 generation batch allowed
    per_row = [0, 0, 0, 1, 0, 1, 0, 1]
    t = make_controller(_config(), _rewards(per_row), batch_size=4)
    local, metrics = t.generate_and_score(), t.metrics
    assert len(local) == 6 and metrics["train/num_kept_groups"] == 3  # one process: all 3 kept groups
    ray4 = make_controller(_config(backend="ray", world=4), _rewards(per_row), batch_size=4)
    batch = ray4.generate_and_score()
    assert len(batch) == 4 and len(batch) % 4 == 0  # 2 whole groups: 4 rows over 4 workers
    uids = list(batch.non_tensor_batch["uid"])
    assert uids[0] == uids[1] and uids[2] == uids[3] and uids[0] != uids[2]


def test_too_few_groups_for_the_workers_is_one_clear_error():
    per_row = [0, 0, 0, 0, 0, 0, 0, 1]  # one varying group: 2 rows cannot split over 4 workers
    t = make_controller(_config(backend="ray", world=4), _rewards(per_row), batch_size=4)
    with pytest.raises(RuntimeError, match="kept 1 groups in 1 generation batches.*max_num_gen_batches"):
        t.generate_and_score()


def test_generation_batches_with_different_extra_columns_merge():
    calls = []

    def reward_fn(data, return_dict=True):  # only group 0 varies; "acc" exists in the first call only
        calls.append(len(data))
        scores = torch.zeros(len(data), R)
        scores[1, -1] = 1.0
        extra = {"reward_errors": [0] * len(data)}
        if len(calls) == 1:
            extra["acc"] = scores.sum(-1).tolist()
        return {"reward_tensor": scores, "reward_extra_info": extra}

    t = make_controller(_config(bsz=2, max_gen=3), reward_fn, batch_size=4)
    batch = t.generate_and_score()
    assert len(calls) == 2 and len(batch) == 4
    acc = list(batch.non_tensor_batch["acc"])
    assert acc[:2] == [0.0, 1.0] and all(math.isnan(a) for a in acc[2:])
