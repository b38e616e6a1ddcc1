"""``verl.utils.reward_score.math_reward`` is the MATH scorer under verl's module name and signatures."""

from verl.utils.reward_score import math as boxed_math
from verl.utils.reward_score import math_reward


def test_math_reward_is_the_math_scorer(capsys):
    assert math_reward.compute_score is boxed_math.compute_score
    assert math_reward.compute_score("so \\boxed{\\frac12}", "0.5") == 1.0
    assert math_reward.is_equiv("\\dfrac{1}{2}", "0.5", verbose=True)
    assert capsys.readouterr().out.strip() == "\\frac{1}{2} \\frac{1}{2}"
    assert math_reward.remove_boxed(math_reward.last_boxed_only_string("a \\boxed{7} b")) == "7"
    assert math_reward.fix_sqrt("\\sqrt3") == "\\sqrt{3}" and math_reward.fix_fracs("\\frac12") == "\\frac{1}{2}"
