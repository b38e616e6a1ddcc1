"""Reward for RL on the built-in tool task: the ``calc_multiply`` scorer with digit credit.

An exact product scores 1; a wrong one earns ``digit_credit`` (default 0.5) times the share of its digits that match
the product's, so GRPO can tell a near copy of the calculator's answer from a guess (the exact-match reward gives both
0, and most groups then carry no signal). Validation counts only full scores (``val-core/acc``: exact answers).

    python -m verl.trainer.main_ppo ... custom_reward_function.path=examples/agent_loop/calc_digit_credit_reward.py \\
        +reward_model.reward_kwargs.digit_credit=0.5
"""

from verl.utils.reward_score import calc_multiply


def compute_score(data_source, solution_str, ground_truth, extra_info=None, digit_credit: float = 0.5, **kwargs):
    return calc_multiply.compute_score(solution_str, ground_truth, digit_credit=digit_credit)
