"""Rule-based scorer for the built-in tool task (``data_source`` "calc_multiply").

What it reads
-------------
The agent loop scores the whole multi-turn response: the model's turns and the tool responses between them, e.g.
(decoded without special tokens)::

    <tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call>user
    <tool_response>178377</tool_response>assistant
    #### 178377

Only the final assistant turn counts: the text after the last ``</tool_response>`` (the whole text when there is
none, as in a single-turn answer). Its answer is the number after its last ``####``, read exactly as the arithmetic
scorer reads it (:func:`verl.utils.reward_score.gsm8k.extract_solution`, ``method="strict"``). So a tool response
holding the right number earns nothing by itself: the model has to state it, after the tool has answered.

Scoring
-------
* the final turn's answer equals the ground truth (an integer, compared exactly) -> ``score`` (default 1.0)
* a wrong answer -> ``format_score`` (default 0.0)
* no ``#### N`` in the final turn (e.g. the trajectory ended on a tool response) -> 0.0

``digit_credit`` (default 0: off) shapes the reward for RL: a wrong answer earns ``digit_credit`` times the share of
digit positions it gets right (`digit_match_fraction`), so an answer that copies five of the product's six digits
is told apart from one with none; only an exact answer scores ``score``, so the share of full scores is still the
task's success.

Never raises for any ``solution_str`` (``None`` is treated as ``""``).
"""

from __future__ import annotations

from typing import Any

from verl.utils.reward_score.gsm8k import extract_solution, to_decimal

__all__ = ["TOOL_RESPONSE_END", "compute_score", "digit_match_fraction", "final_turn"]

TOOL_RESPONSE_END = "</tool_response>"


def final_turn(solution_str: str | None) -> str:
    """The text after the last ``</tool_response>`` of a transcript (all of it when no tool answered)."""
    text = solution_str if isinstance(solution_str, str) else ("" if solution_str is None else str(solution_str))
    return text.rpartition(TOOL_RESPONSE_END)[2]


def digit_match_fraction(answer: str, expected: str) -> float:
    """Share of digit positions where ``answer`` equals ``expected``, over the longer one's length, the numbers
    aligned at their last digit: ``("178377", "178377")`` -> 1.0, ``("178307", "178377")`` -> 5/6,
    ``("78377", "178377")`` -> 5/6 (a dropped leading digit), ``("1783770", "178377")`` -> 1/7 (a shifted copy earns little)."""
    a, e = answer.lstrip("-"), expected.lstrip("-")
    if not a or not e:
        return 0.0
    width = max(len(a), len(e))
    return sum(x == y for x, y in zip(a.rjust(width), e.rjust(width))) / width


def compute_score(
    solution_str: str | None,
    ground_truth: Any,
    format_score: float = 0.0,
    score: float = 1.0,
    digit_credit: float = 0.0,
) -> float:
    """Score a tool-task transcript by the ``#### <integer>`` of its final assistant turn.

    Args:
        solution_str: the decoded multi-turn response (or just the final answer).
        ground_truth: the product, e.g. ``"178377"``.
        format_score: reward for a parsable but wrong answer.
        score: reward for a correct answer.
        digit_credit: a wrong answer earns ``max(format_score, digit_credit * digit_match_fraction)``.
    """
    answer = extract_solution(final_turn(solution_str), method="strict")
    if answer is None:
        return 0.0
    got, expected = to_decimal(answer), to_decimal(ground_truth)
    if got is None or expected is None:
        return float(format_score)
    if got == expected:
        return float(score)
    if digit_credit and got == got.to_integral_value() and expected == expected.to_integral_value():
        partial = digit_credit * digit_match_fraction(str(int(got)), str(int(expected)))
        return float(max(format_score, partial))
    return float(format_score)
