"""verl's ``verl.trainer.ppo.utils`` names (``Role``, ``WorkerType``, ``need_critic``, ``need_reference_policy``,
``need_reward_model``); they live in :mod:`verl.trainer.ppo.roles`."""

from verl.single_controller.base import Worker
from verl.trainer.ppo.roles import Role, need_critic, need_reference_policy, need_reward_model

WorkerType = type[Worker]

__all__ = ["Role", "WorkerType", "need_critic", "need_reference_policy", "need_reward_model"]
