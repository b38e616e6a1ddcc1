"""verl.trainer.config.checks: multi-turn settings the agent loop cannot run are errors at load time, naming the key
and the fix; verl's multi-turn keys load and pass."""

import pytest

from verl.trainer.config.checks import check_ppo_config
from verl.utils.config import ConfigError, load_config

MT = "actor_rollout_ref.rollout.multi_turn"


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ([f"{MT}.enable=true", "trainer.backend=ray"], r"multi_turn.enable=true .* use trainer.backend=local"),
        ([f"{MT}.tokenization_sanity_check_mode=loose"], "tokenization_sanity_check_mode='loose': use one of strict"),
        ([f"{MT}.tool_response_truncate_side=top"], "tool_response_truncate_side='top': use left, middle or right"),
        ([f"{MT}.max_parallel_calls=0"], r"max_parallel_calls=0: at least 1"),
        ([f"{MT}.max_assistant_turns=-1"], r"max_assistant_turns=-1: a number of turns"),
    ],
)
def test_unusable_multi_turn_settings_are_errors_naming_the_key(overrides, match):
    with pytest.raises(ConfigError, match=match):
        check_ppo_config(load_config("ppo_trainer", overrides))


def test_verls_multi_turn_keys_load_and_pass():
    config = load_config(
        "ppo_trainer",
        [
            "actor_rollout_ref.rollout.mode=async",
            f"{MT}.enable=true",
            f"{MT}.max_assistant_turns=5",
            f"{MT}.max_user_turns=5",
            f"{MT}.max_parallel_calls=2",
            f"{MT}.format=hermes",
            f"{MT}.tokenization_sanity_check_mode=ignore_strippable",
            f"{MT}.tool_config_path=examples/agent_loop/tool_configs/calculator.yaml",
            "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        ],
    )
    check_ppo_config(config)
