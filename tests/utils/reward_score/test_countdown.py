import json
import time
from fractions import Fraction

import numpy as np
import pytest

from verl.utils.reward_score import countdown
from verl.utils.reward_score.countdown import compute_score, evaluate_equation, extract_solution, validate_equation

GT = {"target": 60, "numbers": [25, 5, 3]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#### (25 - 5) * 3", "(25 - 5) * 3"),
        ("work\n####   (25 - 5) * 3   \n", "(25 - 5) * 3"),
        ("#### (25 - 5) * 3\nmore text", "(25 - 5) * 3"),
        ("#### 1 + 2\n#### (25 - 5) * 3", "(25 - 5) * 3"),
        ("#### (25 - 5) * 3 = 60", "(25 - 5) * 3"),
        ("#### (25 - 5) * 3.", "(25 - 5) * 3"),
        ("#### （２５ − ５） × ３", "(25 - 5) * 3"),
        ("#### 6 ÷ 3", "6 / 3"),
    ],
)
def test_extract_solution(text, expected):
    assert extract_solution(text) == expected


@pytest.mark.parametrize("text", ["", None, "no marker", "#### ", "####", "#### \nnext line", "1 + 2 ####"])
def test_extract_solution_none(text):
    assert extract_solution(text) is None


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("(25 - 5) * 3", Fraction(60)),
        ("7 / 2", Fraction(7, 2)),
        ("-3 + 5", Fraction(2)),
        ("-(3 - 5)", Fraction(2)),
        ("1 / 3 + 1 / 3 + 1 / 3", Fraction(1)),
        ("((((1))))", Fraction(1)),
        ("٢ + ٣", Fraction(5)),
        ("0", Fraction(0)),
    ],
)
def test_evaluate_equation(expr, expected):
    assert evaluate_equation(expr) == expected


def test_evaluate_is_exact_not_float():
    assert evaluate_equation("1 / 3 * 3") == 1
    assert evaluate_equation("100000000000000000001 - 100000000000000000000") == 1


REJECTED_EXPRESSIONS = [
    "",
    "   ",
    "1 / 0",
    "5 / (3 - 3)",
    "2 ** 10",
    "2**99999",
    "9" * 10000,
    "7 // 2",
    "7 % 2",
    "1.5 + 2",
    "1e3",
    "0x10",
    "1_000",
    "+5",
    "abs(-3)",
    "__import__('os').system('true')",
    "x + 1",
    "True + 1",
    "[1, 2]",
    "(1, 2)",
    "()",
    "1 +",
    "1 = 1",
    "007",
    "1 if 1 else 2",
    "lambda: 1",
    "(" * 150 + "1" + ")" * 150,
    "-" * 199 + "1",
    "1" + "+1" * 150,
    "1 + 2\x00",
    None,
    42,
]


@pytest.mark.parametrize("expr", REJECTED_EXPRESSIONS, ids=range(len(REJECTED_EXPRESSIONS)))
def test_evaluate_rejects(expr):
    start = time.perf_counter()
    assert evaluate_equation(expr) is None
    assert time.perf_counter() - start < 0.5


def test_length_and_node_caps():
    ok = "(" * 99 + "1" + ")" * 99
    assert len(ok) <= countdown.MAX_EXPRESSION_CHARS
    assert evaluate_equation(ok) == 1
    assert evaluate_equation("1" * (countdown.MAX_EXPRESSION_CHARS + 1)) is None
    assert evaluate_equation("1" * countdown.MAX_EXPRESSION_CHARS) == int("1" * countdown.MAX_EXPRESSION_CHARS)


@pytest.mark.parametrize(
    "expr", ["-" * 50000 + "1", "(" * 5000 + "1" + ")" * 5000, "1" + "+1" * 100000], ids=["unary", "parens", "chain"]
)
def test_deep_nesting_is_caught_even_without_caps(monkeypatch, expr):
    # With the caps lifted, parsing/evaluation hits RecursionError (or a parser limit); it must be caught.
    monkeypatch.setattr(countdown, "MAX_EXPRESSION_CHARS", 10**7)
    monkeypatch.setattr(countdown, "MAX_AST_NODES", 10**8)
    assert evaluate_equation(expr) is None
    assert validate_equation(expr, [1]) is False


@pytest.mark.parametrize(
    ("expr", "numbers", "expected"),
    [
        ("(25 - 5) * 3", [25, 5, 3], True),
        ("(25 - 5) * 3", [3, 5, 25], True),
        ("(25 - 5) * 3", np.array([3, 5, 25]), True),
        ("(25 - 5) * 3", (np.int64(3), 5.0, "25"), True),
        ("25 * 3 - 5", [25, 5, 3, 1], False),  # not all used
        ("25 * 3 - 5 - 5", [25, 5, 3], False),  # 5 used twice
        ("25 * 3 - 4", [25, 5, 3], False),  # number not in pool
        ("5 + 5", [5, 5], True),
        ("5", [5, 5], False),
        ("-5 + 10", [5, 10], True),
        ("2 ** 3", [2, 3], False),
        ("(25 - 5) * 3", ["x"], False),
        ("(25 - 5) * 3", [1.5], False),
    ],
)
def test_validate_equation(expr, numbers, expected):
    assert validate_equation(expr, numbers) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#### (25 - 5) * 3", 1.0),
        ("#### 3 * (25 - 5)", 1.0),
        ("#### (25 - 5) * 3 = 60", 1.0),
        ("#### (25 - 5) * 3 = 61", 1.0),  # the claimed result is ignored; the value is checked
        ("#### 25 * 3 - 5", 0.1),  # right numbers, wrong value
        ("#### 60", 0.1),  # wrong numbers
        ("#### (25 - 5) * 3 + 0", 0.1),  # extra number
        ("#### 20 * 3", 0.1),
        ("#### 25 / (5 - 5) * 3", 0.1),  # division by zero
        ("#### (25 - 5) * 3\n#### 25 + 5 + 3", 0.1),  # last marker wins
        ("#### 25 + 5 + 3\n#### (25 - 5) * 3", 1.0),
        ("#### (25 - 5) ** 3", 0.0),
        ("#### (25 - 5) * x", 0.0),
        ("#### ", 0.0),
        ("(25 - 5) * 3", 0.0),
        ("#### （２５ － ５） × ３", 1.0),
        ("#### (٢٥ - ٥) * ٣", 1.0),
    ],
)
def test_compute_score(text, expected):
    assert compute_score(text, GT, format_score=0.1) == expected


def test_division_and_fraction_targets():
    gt = {"target": 24, "numbers": [8, 3, 8, 3]}
    assert compute_score("#### 8 / (3 - 8 / 3)", gt) == 1.0
    gt = {"target": 3, "numbers": [7, 2]}
    assert compute_score("#### 7 / 2", gt, format_score=0.1) == 0.1  # 7/2 is not 3 (no truncation)


def test_defaults():
    assert compute_score("#### 25 * 3 - 5", GT) == 0.0
    assert compute_score("#### (25 - 5) * 3", GT, score=2) == 2.0
    assert isinstance(compute_score("#### (25 - 5) * 3", GT), float)


@pytest.mark.parametrize(
    "ground_truth",
    [
        GT,
        json.dumps(GT),
        json.dumps(GT).encode(),
        str(GT),  # Python-literal string
        {"target": np.int64(60), "numbers": np.array([25, 5, 3])},
        {"target": 60.0, "numbers": np.array([25.0, 5.0, 3.0])},
        {"target": "60", "numbers": ["25", "5", "3"]},
        {"target": 60, "numbers": (3, 5, 25), "extra": "ignored"},
    ],
)
def test_ground_truth_forms(ground_truth):
    assert compute_score("#### (25 - 5) * 3", ground_truth) == 1.0


@pytest.mark.parametrize(
    "ground_truth",
    [
        None,
        "not json",
        "[1, 2]",
        {"target": 60},
        {"numbers": [1]},
        {"target": 60, "numbers": "25,5,3"},
        {"target": 60, "numbers": 5},
        {"target": 60.5, "numbers": [1]},
        {"target": 60, "numbers": [True]},
    ],
)
def test_malformed_ground_truth_raises(ground_truth):
    with pytest.raises(ValueError, match="countdown"):
        compute_score("#### 1", ground_truth)


ROBUSTNESS_INPUTS = [
    "",
    None,
    "garbage",
    "####",
    "#### ",
    "####" * 1000,
    "#### " + "9" * 10000,
    "#### " + "2**99999",
    "#### " + "9**9**9**9",
    "#### " + "(" * 100000,
    "#### " + "(" * 150 + "25 - 5" + ")" * 150 + " * 3",
    "#### " + "-" * 100000 + "1",
    "#### " + "1" + "+1" * 100000,
    "#### " + "٨" * 10000,
    "#### __import__('os').system('echo pwned')",
    "#### (lambda: 1)()",
    "#### 1e400",
    "#### \x00",
    "#### \ud800",
    "#### " + "9" * 5000 + " = 60",
    b"#### (25 - 5) * 3",
    "x" * 1_000_000,
]


@pytest.mark.parametrize("text", ROBUSTNESS_INPUTS, ids=range(len(ROBUSTNESS_INPUTS)))
def test_never_raises(text):
    start = time.perf_counter()
    assert compute_score(text, GT, format_score=0.1) in (0.0, 0.1, 1.0)
    assert extract_solution(text) is None or isinstance(extract_solution(text), str)
    assert evaluate_equation(text) is None or isinstance(evaluate_equation(text), Fraction)
    assert validate_equation(text, [25, 5, 3]) in (True, False)
    assert time.perf_counter() - start < 1.0


def test_bytes_response():
    assert compute_score(b"#### (25 - 5) * 3", GT) == 1.0
