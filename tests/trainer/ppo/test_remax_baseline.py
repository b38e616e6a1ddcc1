"""ReMax's greedy baseline is on the same scale as the sampled rewards (reward_temp, DAPO overlong penalty): a
greedy response equal to the sampled ones gives advantage 0. Stub workers, no model."""

import pytest
import torch
from controller_stubs import R, make_controller

from verl.trainer.ppo.advantage import compute_token_level_rewards
from verl.trainer.ppo.ray_trainer import compute_advantage


def _score_one(data, return_dict=True):
    scores = torch.zeros(len(data), R)
    scores[:, -1] = 1.0
    return {"reward_tensor": scores}


@pytest.mark.parametrize("temp,overlong", [(1.0, False), (2.0, False), (1.0, True), (0.5, True)])
def test_greedy_equal_to_samples_gives_zero_advantage(temp, overlong):
    config = {
        "algorithm": {
            "adv_estimator": "remax",
            "reward_temp": temp,
            "use_kl_in_reward": False,
            "gamma": 1.0,
            "lam": 1.0,
            "norm_adv_by_std_in_grpo": True,
            "filter_groups": {"enable": False},
        },
        "actor_rollout_ref": {"rollout": {"n": 2}},
        "reward_model": {"overlong_buffer": {"enable": overlong, "len": 2, "penalty_factor": 0.5}},
        "data": {"train_batch_size": 2, "max_response_length": R},
    }
    t = make_controller(config, _score_one, batch_size=2)
    batch, _ = compute_token_level_rewards(t.generate_and_score(), t.config.algorithm)
    batch = compute_advantage(batch, "remax", 1.0, 1.0, True, config=t.config.algorithm)
    expected_reward = (1.0 - (0.5 if overlong else 0.0)) / temp  # length R = L_max: penalty -factor
    torch.testing.assert_close(batch.batch["token_level_rewards"].sum(-1), torch.full((4,), expected_reward))
    torch.testing.assert_close(batch.batch["reward_baselines"], torch.full((4,), expected_reward))
    assert batch.batch["advantages"].abs().max().item() == 0.0
