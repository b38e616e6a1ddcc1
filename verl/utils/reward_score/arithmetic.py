"""Rule-based scorer for the built-in arithmetic task (``data_source`` "arithmetic").

Accepted format
---------------
The response shows its work and ends with the answer after a ``####`` marker::

    37 + 48 = 85
    #### 85

The answer is extracted exactly like GSM8K's strict mode
(:func:`verl.utils.reward_score.gsm8k.extract_solution` with ``method="strict"``):
the number after the LAST ``####``, commas dropped, Unicode/fullwidth digits
mapped to ASCII.

Scoring
-------
The ground truth is the integer answer as a string (``"85"``, ``"-12"``; a
Python/numpy int also works). The comparison is exact (``decimal.Decimal``, no
floats, no size limit), so the answer must equal that integer: ``"85"``,
``"085"``, ``"85.0"`` and ``"+85"`` are correct for ``"85"``; ``"85.5"`` is not.

* correct -> ``score`` (default 1.0)
* a number after ``####`` but wrong -> ``format_score`` (default 0.0)
* no ``#### <number>`` -> 0.0

Never raises for any ``solution_str`` (``None`` is treated as ``""``).
"""

from __future__ import annotations

from typing import Any

from verl.utils.reward_score.gsm8k import extract_solution, to_decimal

__all__ = ["compute_score", "extract_solution"]


def compute_score(
    solution_str: str | None,
    ground_truth: Any,
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    """Score an arithmetic-task response ending in ``#### <integer>``.

    Args:
        solution_str: the model response.
        ground_truth: the integer answer, e.g. ``"85"`` or ``"-12"``.
        format_score: reward for a parsable but wrong answer.
        score: reward for a correct answer.

    Returns:
        ``score`` if the answer after the last ``####`` equals the ground truth
        exactly, ``format_score`` if there is an answer but it is wrong (or the
        ground truth is not a number), else ``0.0``.
    """
    answer = extract_solution(solution_str, method="strict")
    if answer is None:
        return 0.0
    got = to_decimal(answer)
    expected = to_decimal(ground_truth)
    if got is None or expected is None:
        return float(format_score)
    return float(score) if got == expected else float(format_score)


def compute_partial_score(solution_str: str | None, ground_truth: Any) -> float:
    """Digit-level partial credit for the arithmetic task (``data_source`` "arithmetic_partial").

    With ``a`` the answer after the last ``####`` and ``g`` the ground truth, both as integers::

        score = 1                                       if a == g
              = 0.5 * matched / max(len(|a|), len(|g|))  otherwise, 0 without an answer

    where ``matched`` counts the digit positions, aligned from the units, on which ``|a|`` and ``|g|``
    agree (a wrong sign costs nothing more: the half weight already keeps any wrong answer below a right
    one). ``"#### 95"`` for 85 gets 0.25; ``"#### 185"`` gets 0.5 * 2/3.
    """
    answer = extract_solution(solution_str, method="strict")
    got = to_decimal(answer) if answer is not None else None
    expected = to_decimal(ground_truth)
    if got is None or expected is None or got != got.to_integral_value():
        return 0.0
    if got == expected:
        return 1.0
    a, g = str(abs(int(got))), str(abs(int(expected)))
    matched = sum(x == y for x, y in zip(reversed(a), reversed(g)))
    return 0.5 * matched / max(len(a), len(g))
