"""The dict API and the Python API's argument groups are alias tables over the one schema, generated from its
fields' ``"api"`` metadata: every config key they name exists in the ``ppo_trainer`` schema (a renamed or removed key
fails here, not in a user's script), and the generated tables are the hand-written ones they replaced."""

import re
from dataclasses import dataclass, field

import pytest

from verl.base_config import BaseConfig
from verl.trainer.api import DEFAULT_ADV_ESTIMATOR, DataConfig, EngineConfig, OptimConfig
from verl.utils.config import ConfigError, default_config, get_ppo_default_config, job_schema, load_config, schema_keys
from verl.utils.config_dict import (
    API_GROUPS,
    DICT_ALIAS_GROUPS,
    PPO_DICT_ALIASES,
    PPO_DICT_SPECIAL,
    PPO_DICT_TREE_DEFAULTS,
    api_table,
    schema_api_names,
)
from verl.utils.config_reference import key_rows

SECTIONS = ("data", "actor_rollout_ref", "critic", "reward_model", "custom_reward_function", "algorithm", "trainer")
KEY = re.compile(r"\b((?:" + "|".join(SECTIONS) + r")(?:\.[a-z_]+)+)")


def _named_keys(text: str) -> list[str]:
    return KEY.findall(text)


@pytest.mark.parametrize(
    "table",
    [
        PPO_DICT_ALIASES,
        PPO_DICT_SPECIAL,
        PPO_DICT_TREE_DEFAULTS,
        DataConfig.KEYS,
        EngineConfig.KEYS,
        OptimConfig.KEYS,
    ],
    ids=["PPO_DICT_ALIASES", "PPO_DICT_SPECIAL", "PPO_DICT_TREE_DEFAULTS", "DataConfig", "EngineConfig", "OptimConfig"],
)
def test_every_alias_names_schema_keys(table):
    keys = set(schema_keys(job_schema("ppo_trainer")))
    named = [k for v in table.values() for k in _named_keys(str(v))] + [k for k in table if k.split(".")[0] in SECTIONS]
    assert named, "the table names no config keys"
    missing = [k for k in named if k not in keys]
    assert not missing, f"alias targets missing from the schema: {missing}"


# The tables as written by hand before the schema carried the API names (verl/trainer/api.py and
# verl/utils/config_dict.py at cfb2d25), copied once: the generated tables must accept exactly these names and map
# them to the same keys.
HAND_WRITTEN = {
    "DataConfig": {
        "rollout_batch_size": "data.train_batch_size",
        "num_rollout_steps": "actor_rollout_ref.actor.ppo_mini_batch_size + actor_rollout_ref.actor.ppo_epochs",
        "responses_per_prompt": "actor_rollout_ref.rollout.n",
        "train_files": "data.train_files",
        "val_files": "data.val_files",
        "max_prompt_length": "data.max_prompt_length",
        "max_response_length": "data.max_response_length",
        "val_batch_size": "data.val_batch_size",
        "shuffle": "data.shuffle",
        "seed": "data.seed",
    },
    "EngineConfig": {
        "kl_coef": "algorithm.kl_ctrl.kl_coef (+ algorithm.use_kl_in_reward, kl_ctrl.type=fixed)",
        "gamma": "algorithm.gamma",
        "lam": "algorithm.lam",
        "reward_temp": "algorithm.reward_temp",
        "adv_estimator": "algorithm.adv_estimator",
        "temperature": "actor_rollout_ref.rollout.temperature",
        "top_p": "actor_rollout_ref.rollout.top_p",
        "top_k": "actor_rollout_ref.rollout.top_k",
        "entropy_coeff": "actor_rollout_ref.actor.entropy_coeff",
    },
    "OptimConfig": {
        "actor_lr": "actor_rollout_ref.actor.optim.lr",
        "critic_lr": "critic.optim.lr",
        "weight_decay": "actor_rollout_ref.actor.optim.weight_decay + critic.optim.weight_decay",
        "lr_warmup_steps_ratio": "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio + critic.optim.lr_warmup_steps_ratio",
        "warmup_style": "actor_rollout_ref.actor.optim.lr_scheduler_type + critic.optim.lr_scheduler_type",
        "grad_clip": "actor_rollout_ref.actor.grad_clip + critic.grad_clip",
    },
    "PPO_DICT_ALIASES": {
        "model.pretrained_model_name_or_path": "actor_rollout_ref.model.path",
        "model.tokenizer_name_or_path": "data.tokenizer",
        "train.lr": "actor_rollout_ref.actor.optim.lr",
        "train.critic_lr": "critic.optim.lr",
        "train.batch_size": "data.train_batch_size",
        "train.mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size",
        "train.responses_per_prompt": "actor_rollout_ref.rollout.n",
        "train.ppo_epochs": "actor_rollout_ref.actor.ppo_epochs",
        "train.total_steps": "trainer.total_training_steps",
        "train.max_response_length": "data.max_response_length",
        "train.seed": "trainer.seed",
    },
    "PPO_DICT_TREE_DEFAULTS": {"algorithm.adv_estimator": "gae"},
}


def test_generated_tables_equal_the_hand_written_ones():
    generated = {
        "DataConfig": DataConfig.KEYS,
        "EngineConfig": EngineConfig.KEYS,
        "OptimConfig": OptimConfig.KEYS,
        "PPO_DICT_ALIASES": PPO_DICT_ALIASES,
        "PPO_DICT_TREE_DEFAULTS": PPO_DICT_TREE_DEFAULTS,
    }
    expected = {table: dict(keys) for table, keys in HAND_WRITTEN.items()}
    # kl_coef's old entry carried a note on what else it sets; ppo_trainer_overrides still sets it (test_api.py)
    expected["EngineConfig"]["kl_coef"] = "algorithm.kl_ctrl.kl_coef"
    assert generated == expected


def test_every_api_name_is_on_a_leaf_of_the_schema():
    root = job_schema("ppo_trainer")
    groups = {key for key, _, group in key_rows(root) if group}
    names = schema_api_names(root)
    assert names and not [key for key in names if key not in schema_keys(root) or key in groups]
    for group in (*API_GROUPS, *DICT_ALIAS_GROUPS):
        keys = [key for value in api_table(group).values() for key in value.split(" + ")]
        assert keys and set(keys) <= set(names), group


def test_the_dict_defaults_differ_from_a_run_only_where_the_schema_default_is_kept():
    # load_config("ppo_trainer") is the quickstart recipe over the schema: GRPO; the dict API keeps the schema's GAE
    assert PPO_DICT_TREE_DEFAULTS == {"algorithm.adv_estimator": default_config("ppo_trainer").algorithm.adv_estimator}
    assert load_config("ppo_trainer").algorithm.adv_estimator == "grpo"
    assert get_ppo_default_config()["algorithm"]["adv_estimator"] == DEFAULT_ADV_ESTIMATOR == "gae"


@dataclass
class _Leafy(BaseConfig):
    x: int = field(default=1, metadata={"api": ("DataConfig.ex",)})


@dataclass
class _Tree(BaseConfig):
    a: _Leafy = field(default_factory=_Leafy, metadata={"api": {"x": ("train.x",)}})
    b: _Leafy = field(default_factory=_Leafy)


def test_api_metadata_forms_and_errors():
    assert schema_api_names(_Tree) == {"a.x": ("train.x", "DataConfig.ex"), "b.x": ("DataConfig.ex",)}
    assert api_table("DataConfig", _Tree) == {"ex": "a.x + b.x"} and api_table("train", _Tree) == {"x": "a.x"}

    @dataclass
    class _BadKey(BaseConfig):
        a: _Leafy = field(default_factory=_Leafy, metadata={"api": {"y": ("train.y",)}})

    @dataclass
    class _BadGroup(BaseConfig):
        z: int = field(default=0, metadata={"api": ("Trian.z",)})

    for bad in (_BadKey, _BadGroup):
        with pytest.raises(ConfigError, match="API names"):
            schema_api_names(bad)
