"""DAPO's math scorer against hand-written cases (expected values worked out by hand)."""

import pytest

from verl.utils.reward_score import default_compute_score, get_scorer
from verl.utils.reward_score.math_dapo import compute_score, normalize_final_answer


@pytest.mark.parametrize(
    "solution, truth, correct, pred",
    [
        ("long reasoning...\nAnswer: 34", "34", True, "34"),
        ("answer: 34 degrees", "34", True, "34"),  # case-insensitive marker, units removed
        ("Answer: 33\nthen Answer: 34", "34", True, "34"),  # the last Answer: counts
        ("Answer: x = 12", "12", True, "12"),  # the part after the last '='
        ("Answer: $\\frac{1}{2}$", "\\frac12", True, "\\frac{1}{2}"),  # \fracab shorthand on both sides
        ("Answer: 100,000", "100000", True, "100000"),
        ("Answer: \\text{(B)}", "(B)", True, "(B)"),
        ("Answer: 35", "34", False, "35"),
        ("the result is 34", "34", False, "[INVALID]"),  # no Answer: line
    ],
)
def test_minerva_mode(solution, truth, correct, pred):
    result = compute_score(solution, truth)
    assert result == {"score": 1.0 if correct else -1.0, "acc": correct, "pred": pred}


def test_only_the_last_300_characters_are_read():
    assert compute_score("Answer: 34" + "x" * 300, "34")["acc"] is False
    assert compute_score("x" * 1000 + "Answer: 34", "34")["acc"] is True


def test_strict_box_mode_compares_the_last_box_as_written():
    assert compute_score("so \\boxed{7}", "7", strict_box_verify=True)["score"] == 1.0
    assert compute_score("so \\boxed{7.0}", "7", strict_box_verify=True)["score"] == -1.0  # no normalisation here
    assert compute_score("\\boxed{7}" + "y" * 150, "7", strict_box_verify=True)["acc"] is False  # outside the last 100


def test_normalisation():
    assert normalize_final_answer("\\boxed{5} cm") == "5"
    assert normalize_final_answer("a \\sqrt2") == "\\sqrt{2}"


@pytest.mark.parametrize("source", ["math_dapo", "math", "math_dapo_reasoning", "aime24", "aime_2025"])
def test_verls_data_sources_use_it(source):
    assert get_scorer(source) is compute_score
    assert default_compute_score(source, "Answer: 12", "12")["score"] == 1.0
