"""Reward managers: a batch of responses in, token-level scores out (verl's ``verl.workers.reward_manager``).

``naive`` scores one response at a time, ``batch`` the whole batch in one call, ``dapo`` adds DAPO's overlong
penalty, ``prime`` scores in worker processes with a deadline. ``get_reward_manager_cls(name)`` finds a manager by
name; ``@register(name)`` adds one.
"""

from verl.workers.reward_manager.registry import REWARD_MANAGER_REGISTRY, get_reward_manager_cls, register  # noqa: I001
from verl.workers.reward_manager.abstract import AbstractRewardManager
from verl.workers.reward_manager.batch import BatchRewardManager
from verl.workers.reward_manager.dapo import DAPORewardManager
from verl.workers.reward_manager.naive import NaiveRewardManager, load_custom_reward_function
from verl.workers.reward_manager.prime import PrimeRewardManager

__all__ = [
    "REWARD_MANAGER_REGISTRY",
    "AbstractRewardManager",
    "BatchRewardManager",
    "DAPORewardManager",
    "NaiveRewardManager",
    "PrimeRewardManager",
    "get_reward_manager_cls",
    "load_custom_reward_function",
    "register",
]
