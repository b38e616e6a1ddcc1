"""The dict API and the Python API's argument groups are alias tables over the one schema: every config key they
name exists in the ``ppo_trainer`` schema (a renamed or removed key fails here, not in a user's script)."""

import re

import pytest

from verl.trainer.api import DataConfig, EngineConfig, OptimConfig
from verl.utils.config import job_schema, schema_keys
from verl.utils.config_dict import PPO_DICT_ALIASES, PPO_DICT_SPECIAL, PPO_DICT_TREE_DEFAULTS

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
