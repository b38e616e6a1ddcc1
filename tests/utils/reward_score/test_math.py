"""The MATH boxed-answer scorer against hand-written cases (expected values worked out by hand)."""

import pytest

from verl.utils.reward_score import default_compute_score
from verl.utils.reward_score.math import compute_score, is_equiv, last_boxed_only_string, remove_boxed, strip_string


@pytest.mark.parametrize(
    "solution, truth, expected",
    [
        (r"so the answer is \boxed{\frac{1}{2}}", r"\frac12", 1.0),  # unbraced fraction normalised
        (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
        (r"\boxed{\dfrac{3}{4}}", r"\frac{3}{4}", 1.0),
        (r"\boxed{3/4}", r"\frac{3}{4}", 1.0),
        (r"\boxed{\frac{1}2}", r"\frac{1}{2}", 1.0),
        (r"\boxed{10^\circ}", "10", 1.0),
        (r"\boxed{x = 5}", "5", 1.0),
        (r"\boxed{5 \text{ cm}}", "5", 1.0),
        (r"\boxed{\$18.90}", "18.90", 1.0),
        (r"\boxed{50\%}", "50", 1.0),
        (r"\boxed{.5}", r"\frac{1}{2}", 1.0),
        (r"\boxed{\sqrt3}", r"\sqrt{3}", 1.0),
        (r"\boxed{1,000}", "1000", 1.0),  # beyond MATH's graders: thousands separators
        (r"\boxed{3.0}", "3", 1.0),  # and numbers by value
        (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)", 1.0),
        (r"\boxed{1} first, then \boxed{2}", "2", 1.0),  # the last boxed answer counts
        (r"\boxed{2} first, then \boxed{1}", "2", 0.0),
        (r"\boxed 5$ done", "5", 1.0),
        (r"\fbox{7}", "7", 1.0),
        (r"\boxed{4}", r"\boxed{4}", 1.0),  # a boxed ground truth is unboxed first
        ("the answer is 2", "2", 0.0),  # no boxed answer
        (r"\boxed{3", "3", 0.0),  # braces never close
        (r"\boxed{\sqrt{2}+1}", r"1+\sqrt{2}", 0.0),  # compared as text, not symbolically
        (None, "3", 0.0),
        (b"\\boxed{3}", "3", 1.0),
    ],
)
def test_compute_score(solution, truth, expected):
    assert compute_score(solution, truth) == expected


def test_boxed_extraction_matches_nested_braces():
    text = r"We get $\boxed{\frac{\sqrt{3}}{2}}$ and stop."
    assert last_boxed_only_string(text) == r"\boxed{\frac{\sqrt{3}}{2}}"
    assert remove_boxed(last_boxed_only_string(text)) == r"\frac{\sqrt{3}}{2}"
    assert last_boxed_only_string("no box") is None and remove_boxed(None) is None


def test_normalisation_and_equivalence():
    assert strip_string(r"\left(1, 2\right)") == "(1,2)"
    assert strip_string(r"\tfrac{1}{3}") == r"\frac{1}{3}"
    assert is_equiv("0.5", r"\frac{1}{2}") and not is_equiv(None, "1") and not is_equiv("1", "2")


@pytest.mark.parametrize("source", ["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"])
def test_registered_for_verls_math_data_sources(source):
    assert default_compute_score(source, r"thus \boxed{\frac{2}{3}}", r"\frac{2}{3}") == 1.0
    assert default_compute_score(source, r"thus \boxed{\frac{2}{5}}", r"\frac{2}{3}") == 0.0
