"""Managers by name: the four built in, a user's own by decorator, and a clash is an error."""

import pytest

from verl.workers.reward_manager import (
    BatchRewardManager,
    DAPORewardManager,
    NaiveRewardManager,
    PrimeRewardManager,
    get_reward_manager_cls,
    register,
)
from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY


def test_builtin_managers_are_registered():
    assert get_reward_manager_cls("naive") is NaiveRewardManager
    assert get_reward_manager_cls("batch") is BatchRewardManager
    assert get_reward_manager_cls("dapo") is DAPORewardManager
    assert get_reward_manager_cls("prime") is PrimeRewardManager
    with pytest.raises(ValueError, match="Unknown reward manager: Naive .*registered: \\['batch', 'dapo'"):
        get_reward_manager_cls("Naive")


def test_register_a_custom_manager_and_refuse_a_clash():
    try:

        @register("test_custom_rm")
        class Custom:
            pass

        assert get_reward_manager_cls("test_custom_rm") is Custom
        assert register("test_custom_rm")(Custom) is Custom  # the same class again is fine

        with pytest.raises(ValueError, match="'test_custom_rm' is already registered as .*Custom"):

            @register("test_custom_rm")
            class Other:
                pass

    finally:
        REWARD_MANAGER_REGISTRY.pop("test_custom_rm", None)
