"""A verl user's own extensions run here unchanged: a reward manager registered with ``@register`` (chosen by
``reward_model.reward_manager``), one loaded by ``reward_manager.source=importlib``, and a policy loss registered
with ``@register_policy_loss`` in verl's signature ``(old_log_prob, log_prob, advantages, response_mask,
loss_agg_mode, config, rollout_is_weights) -> (loss, metrics)``, imported in the workers through
``actor_rollout_ref.model.external_lib``. Each trains a step through ``main_ppo`` and the extension's own numbers
show up in the run's metrics."""

from __future__ import annotations

import sys
import textwrap

import pytest

from verl.trainer.main_ppo import build_reward_fns, run_ppo
from verl.utils.config import load_config
from verl.workers.reward_manager import DAPORewardManager, NaiveRewardManager
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY

ONE_STEP = [
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.total_training_steps=1",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.val_before_train=false",
    "trainer.logger=[file]",
]

# A reward manager written against verl's interface: scores every response by its length and reports an extra
# column; the file also holds the scoring function, as verl's docs show (custom_reward_function.path).
MANAGER_FILE = """
import torch

from verl.workers.reward_manager import AbstractRewardManager, register


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return float(len(solution_str) % 3)


@register("{name}")
class LengthModThree(AbstractRewardManager):
    def __init__(self, tokenizer, num_examine, compute_score=None, reward_fn_key="data_source", **kwargs):
        self.tokenizer = tokenizer
        self.compute_score = compute_score

    def __call__(self, data, return_dict=False):
        rewards = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        marks = []
        for i in range(len(data)):
            mask = data.batch["attention_mask"][i, -rewards.shape[1]:]
            n = int(mask.sum())
            text = self.tokenizer.decode(data.batch["responses"][i, :n], skip_special_tokens=True)
            rewards[i, n - 1] = self.compute_score(data.non_tensor_batch["data_source"][i], text, None)
            marks.append(7.0)
        if return_dict:
            return {{"reward_tensor": rewards, "reward_extra_info": {{"custom_mark": marks}}}}
        return rewards
"""


def _write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


@pytest.mark.slow
def test_registered_reward_manager_is_chosen_by_name_and_scores_the_run(tmp_path):
    name = "length_mod_three_registered"
    path = _write(tmp_path / "my_reward.py", MANAGER_FILE.format(name=name))
    config = load_config(
        "ppo_trainer",
        [*ONE_STEP, f"custom_reward_function.path={path}", f"reward_model.reward_manager={name}"],
        overrides={"trainer.default_local_dir": str(tmp_path / "run")},
    )
    result = run_ppo(config)
    assert REWARD_MANAGER_REGISTRY[name].__name__ == "LengthModThree"
    assert type(result["trainer"].reward_fn).__name__ == "LengthModThree"
    history = result["history"]
    assert history["reward/custom_mark/mean"][0][1] == pytest.approx(7.0)
    score = history["critic/score/mean"][0][1]
    assert 0.0 <= score <= 2.0  # len % 3, not the arithmetic scorer's 0/1 (the mark proves the manager ran)


def test_importlib_reward_manager_is_loaded_from_its_file(tmp_path):
    path = _write(tmp_path / "my_manager.py", MANAGER_FILE.format(name="length_mod_three_importlib"))
    config = load_config(
        "ppo_trainer",
        [
            *ONE_STEP,
            "reward_manager.source=importlib",
            f"reward_manager.module.path={path}",
            "reward_manager.name=LengthModThree",
            "reward_model.reward_manager=LengthModThree",  # verl derives reward_manager.name from this key
        ],
    )
    reward_fn, val_reward_fn = build_reward_fns(config, tokenizer=None)
    assert type(reward_fn).__name__ == "LengthModThree" and type(val_reward_fn).__name__ == "LengthModThree"


def test_builtin_managers_by_name_and_unknown_name_lists_the_registered_ones():
    assert isinstance(build_reward_fns(load_config("ppo_trainer"), None)[0], NaiveRewardManager)
    dapo = load_config("ppo_trainer", ["reward_model.reward_manager=dapo"])
    assert isinstance(build_reward_fns(dapo, None)[0], DAPORewardManager)
    unknown = load_config("ppo_trainer", ["reward_model.reward_manager=nope"])
    with pytest.raises(ValueError, match=r"Unknown reward manager: nope \(registered: .*'naive'"):
        build_reward_fns(unknown, None)


LOSS_MODULE = '''
import torch

from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss

CALLS = []


@register_policy_loss("{name}")
def compute_policy_loss_clipped_sign(
    old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, rollout_is_weights=None
):
    """A REINFORCE-style loss on the sign of the advantage, clipped as PPO's ratio (a user's own idea)."""
    ratio = torch.exp(log_prob - old_log_prob)
    clip = config.clip_ratio
    pg_losses = -torch.sign(advantages) * torch.clamp(ratio, 1 - clip, 1 + clip)
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode)
    CALLS.append(loss_agg_mode)
    return loss, {{"actor/sign_fraction": (advantages > 0).float().mean().item(), "actor/pg_clipfrac": 0.0}}
'''


@pytest.mark.slow
def test_registered_policy_loss_with_verls_signature_trains(tmp_path, monkeypatch):
    name = "clipped_sign_user_loss"
    module = f"user_losses_{tmp_path.name.replace('-', '_')}"
    _write(tmp_path / f"{module}.py", LOSS_MODULE.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(
        "ppo_trainer",
        [
            *ONE_STEP,
            f"actor_rollout_ref.actor.policy_loss.loss_mode={name}",
            f"actor_rollout_ref.model.external_lib={module}",
        ],
        overrides={"trainer.default_local_dir": str(tmp_path / "run")},
    )
    try:
        result = run_ppo(config)
        calls = sys.modules[module].CALLS
    finally:
        from verl.core_algos import POLICY_LOSS_REGISTRY

        POLICY_LOSS_REGISTRY.pop(name, None)
        sys.modules.pop(module, None)
    assert calls and set(calls) == {"token-mean"}
    history = result["history"]
    assert 0.0 <= history["actor/sign_fraction"][0][1] <= 1.0
    assert history["actor/pg_clipfrac"][0][1] == 0.0  # the loss's own metrics replace the built-in ones
