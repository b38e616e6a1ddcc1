"""`load_reward_manager` builds the manager a verl config names, with the custom function and its kwargs bound;
`compute_reward` accepts managers with or without ``return_dict``."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from verl.protocol import DataProto
from verl.trainer.ppo.reward import compute_reward, load_reward_manager
from verl.utils.model import load_tokenizer
from verl.workers.reward_manager import DAPORewardManager, NaiveRewardManager, register
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("builtin://tiny-qwen2-arith-sft")


def _config(tmp_path, **overrides):
    path = tmp_path / "my_reward.py"
    path.write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None, scale=1.0):\n    return scale\n"
    )
    base = {
        "data": {"reward_fn_key": "task"},
        "reward_model": {"reward_manager": "naive", "error_score": -2.0},
        "custom_reward_function": {"path": str(path), "name": "score", "reward_kwargs": {"scale": 3.0}},
    }
    return OmegaConf.merge(base, overrides)


def _batch(tok):
    ids = torch.tensor([tok("7", add_special_tokens=False)["input_ids"] + [tok.pad_token_id]])
    return DataProto.from_dict(
        {"responses": ids, "response_mask": (ids != tok.pad_token_id).long()},
        non_tensors={"task": np.array(["t"], dtype=object)},
    )


def test_naive_with_the_custom_function_and_its_kwargs(tmp_path, tok):
    manager = load_reward_manager(_config(tmp_path), tok, num_examine=0)
    assert isinstance(manager, NaiveRewardManager)
    assert manager.reward_fn_key == "task" and manager.error_score == -2.0
    reward, extra = compute_reward(_batch(tok), manager)
    assert reward.sum().item() == 3.0 and extra["score"] == [3.0]


def test_the_manager_by_registry_or_by_file_and_its_kwargs(tmp_path, tok):
    dapo = load_reward_manager(
        _config(tmp_path, reward_model={"reward_manager": "dapo"}), tok, 0, max_resp_len=16, overlong_buffer_cfg=None
    )
    assert isinstance(dapo, DAPORewardManager) and dapo.max_resp_len == 16
    (tmp_path / "my_manager.py").write_text(
        "from verl.workers.reward_manager import NaiveRewardManager\n"
        "class Doubled(NaiveRewardManager):\n"
        "    def __call__(self, data, return_dict=False):\n"
        "        return super().__call__(data) * 2\n"
    )
    section = {"source": "importlib", "name": "Doubled", "module": {"path": str(tmp_path / "my_manager.py")}}
    doubled = load_reward_manager(_config(tmp_path, reward_manager=section), tok, 0)
    reward, extra = compute_reward(_batch(tok), doubled)  # returns a tensor even for return_dict=True
    assert reward.sum().item() == 6.0 and extra == {}
    with pytest.raises(ValueError, match="source='pip'"):
        load_reward_manager(_config(tmp_path, reward_manager={"source": "pip", "name": "x"}), tok, 0)


def test_a_manager_without_return_dict_and_a_registered_one(tmp_path, tok):
    try:

        @register("test_ones")
        class Ones:
            def __init__(self, tokenizer, num_examine, compute_score, reward_fn_key="data_source"):
                self.compute_score = compute_score

            def __call__(self, data):
                return torch.ones_like(data.batch["responses"], dtype=torch.float32)

        manager = load_reward_manager(_config(tmp_path, reward_model={"reward_manager": "test_ones"}), tok, 0)
        reward, extra = compute_reward(_batch(tok), manager)
        assert reward.sum().item() == 2.0 and extra == {}
        assert manager.compute_score("x", "y", "z") == 3.0  # the custom function with its kwargs bound
    finally:
        REWARD_MANAGER_REGISTRY.pop("test_ones", None)


def test_both_ways_of_building_a_manager_take_the_same_settings():
    """manager_settings is the one rule: load_reward_manager (verl's) and main_ppo's build_reward_fns pass
    error_score, num_workers and, with a SandboxFusion URL, the scorer arguments verl binds."""
    from verl.trainer.main_ppo import build_reward_fns
    from verl.trainer.ppo.reward import load_reward_manager, manager_settings
    from verl.utils.config import load_config
    from verl.utils.model import load_tokenizer
    from verl.workers.reward_manager import NaiveRewardManager

    overrides = ["reward_model.num_workers=3", "reward_model.error_score=-1", "reward_model.sandbox_fusion.url=http://h/run_code",
                 "reward_model.sandbox_fusion.max_concurrent=5", "reward_model.sandbox_fusion.memory_limit_mb=256"]  # fmt: skip
    config = load_config("ppo_trainer", overrides)
    settings = manager_settings(config, NaiveRewardManager)
    assert settings["num_workers"] == 3 and settings["error_score"] == -1 and settings["memory_limit_mb"] == 256
    assert settings["sandbox_fusion_url"] == "http://h/run_code" and settings["concurrent_semaphore"]._value == 5
    tok = load_tokenizer("builtin://tiny-qwen2")
    for manager in (load_reward_manager(config, tok, 0), build_reward_fns(config, tok)[0]):
        assert manager.num_workers == 3 and manager.error_score == -1
        assert manager.reward_kwargs["sandbox_fusion_url"] == "http://h/run_code"
    assert "sandbox_fusion_url" not in manager_settings(load_config("ppo_trainer", []), NaiveRewardManager)


def test_newer_verls_reward_section_spells_the_same_settings():
    """reward.sandbox_fusion.* and reward.num_workers (newer verl) mean reward_model's keys; both set differently is
    one error naming the two keys."""
    from verl.trainer.ppo.reward import manager_settings
    from verl.utils.config import load_config
    from verl.workers.reward_manager import NaiveRewardManager

    newer = [
        "reward.num_workers=3",
        "reward.sandbox_fusion.url=http://h/run_code",
        "reward.sandbox_fusion.max_concurrent=5",
    ]
    older = [k.replace("reward.", "reward_model.", 1) for k in newer]
    a, b = (manager_settings(load_config("ppo_trainer", o), NaiveRewardManager) for o in (newer, older))
    for settings in (a, b):
        assert settings["num_workers"] == 3 and settings["sandbox_fusion_url"] == "http://h/run_code"
        assert settings["concurrent_semaphore"]._value == 5 and settings["memory_limit_mb"] == 1024
    agreeing = manager_settings(load_config("ppo_trainer", newer + older), NaiveRewardManager)
    assert agreeing["num_workers"] == 3
    explicit_one = load_config("ppo_trainer", ["reward.num_workers=1", "reward_model.num_workers=2"])
    with pytest.raises(ValueError, match=r"reward.num_workers=1 and reward_model.num_workers=2 disagree"):
        manager_settings(explicit_one, NaiveRewardManager)  # 1 set on purpose is not the unset default
    clash = load_config(
        "ppo_trainer", ["reward.sandbox_fusion.url=http://a", "reward_model.sandbox_fusion.url=http://b"]
    )
    with pytest.raises(ValueError, match=r"reward.sandbox_fusion.url='http://a' and reward_model.sandbox_fusion.url"):
        manager_settings(clash, NaiveRewardManager)
