"""A custom reward function in verl's signature: correctness from the built-in scorer, minus a small length cost.

    python -m verl.trainer.main_ppo custom_reward_function.path=examples/custom_reward/length_aware_reward.py \
        custom_reward_function.name=compute_score +reward_model.reward_kwargs.length_cost=0.002
"""

from verl.utils.reward_score import default_compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, length_cost: float = 0.001, **kwargs):
    correct = float(default_compute_score(data_source, solution_str, ground_truth, extra_info))
    return {"score": correct - length_cost * len(solution_str), "acc": correct}
