from verl.workers.reward_manager.naive import NaiveRewardManager, load_custom_reward_function

__all__ = ["NaiveRewardManager", "load_custom_reward_function"]
