import time

import pytest

from verl.utils.reward_score.arithmetic import compute_score


@pytest.mark.parametrize(
    ("text", "ground_truth", "expected"),
    [
        ("37 + 48 = 85\n#### 85", "85", 1.0),
        ("3 - 15 = -12\n#### -12", "-12", 1.0),
        ("#### 85", 85, 1.0),
        ("#### 85.0", "85", 1.0),
        ("#### 085", "85", 1.0),
        ("#### +85", "85", 1.0),
        ("#### 1,085", "1085", 1.0),
        ("#### 12", "-12", 0.5),
        ("#### 84", "85", 0.5),
        ("#### 85.5", "85", 0.5),
        ("#### 85", "not a number", 0.5),
        ("37 + 48 = 85", "85", 0.0),  # no marker: strict only
        ("#### ", "85", 0.0),
        ("#### eighty-five", "85", 0.0),
        ("#### 84\n#### 85", "85", 1.0),  # last marker wins
        ("#### 85\n#### 84", "85", 0.5),
        ("#### 85\n#### ", "85", 0.0),
    ],
)
def test_compute_score(text, ground_truth, expected):
    assert compute_score(text, ground_truth, format_score=0.5) == expected


def test_defaults():
    assert compute_score("#### 84", "85") == 0.0
    assert compute_score("#### 85", "85") == 1.0
    assert compute_score("#### 85", "85", score=2.0) == 2.0


def test_exact_big_integers():
    big = "123456789012345678901234567890"
    assert compute_score(f"#### {big}", big) == 1.0
    assert compute_score(f"#### {big[:-1]}1", big) == 0.0
    nines = "9" * 5000
    assert compute_score(f"#### {nines}", nines) == 1.0
    assert compute_score(f"#### {nines}", 10**5000 - 1) == 1.0


@pytest.mark.parametrize("text", ["#### ٨٥", "#### ８５", "＃＃＃＃ ８５", "#### ८५"])
def test_unicode_digits(text):
    assert compute_score(text, "85") == 1.0


ROBUSTNESS_INPUTS = [
    "",
    None,
    "garbage",
    "#### ",
    "####",
    "####" * 1000,
    "9" * 5000,
    "#### " + "9" * 5000,
    "#### " + "1" * 200000,
    "." * 100000,
    "#### 1e400",
    "#### -",
    "#### ٨" * 1000,
    "\x00\ufffd",
]


@pytest.mark.parametrize("text", ROBUSTNESS_INPUTS, ids=range(len(ROBUSTNESS_INPUTS)))
def test_never_raises(text):
    start = time.perf_counter()
    assert compute_score(text, "85", format_score=0.5) in (0.0, 0.5)
    assert time.perf_counter() - start < 2.0


# ---- digit-level partial credit (data_source "arithmetic_partial") --------------------------------


@pytest.mark.parametrize(
    "response, truth, expected",
    [
        ("12 + 73 = 85\n#### 85", "85", 1.0),
        ("#### 95", "85", 0.25),  # the units digit right: 0.5 * 1/2
        ("#### 185", "85", 0.5 * 2 / 3),  # two of three positions
        ("#### -85", "85", 0.5),  # every digit right, the sign wrong: still below a right answer
        ("#### 58", "85", 0.0),
        ("no answer", "85", 0.0),
        ("#### 8.5", "85", 0.0),
    ],
)
def test_partial_credit_by_digit_position(response, truth, expected):
    from verl.utils.reward_score import default_compute_score
    from verl.utils.reward_score.arithmetic import compute_partial_score

    assert compute_partial_score(response, truth) == pytest.approx(expected)
    assert default_compute_score("arithmetic_partial", response, truth) == pytest.approx(expected)
