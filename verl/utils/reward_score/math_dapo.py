"""DAPO's math scorer (``data_source`` "math_dapo", "math", "math_dapo_reasoning", or any name starting with "aime"):
the data sources of DAPO-Math-17k and AIME, scored as DAPO (Yu et al., 2025) scores them.

Two ways to read the response's answer, both from its last 300 characters (where a long reasoning trace ends):

* default (Minerva style): the text after the last ``Answer:`` (case-insensitive) up to the line's end;
* ``strict_box_verify=True``: the last ``\\boxed{...}`` in the final 100 characters (or in what follows
  ``pause_tokens_index[-1] + 100``), compared with the ground truth as written.

In the default mode both sides are normalised as in Minerva's evaluation (Lewkowycz et al., 2022): the part after the
last ``=``; articles, ``\\text{...}`` / ``\\textbf{...}`` / ``\\overline{...}`` / ``\\boxed{...}`` wrappers, dollar
signs, units and words such as "degrees", "cm", "dollars" removed; ``\\fracab`` -> ``\\frac{a}{b}``,
``\\sqrta`` -> ``\\sqrt{a}``; ``100,000`` -> ``100000``.

Returns ``{"score": 1.0 or -1.0, "acc": bool, "pred": str}``: DAPO rewards a wrong answer with -1, and ``acc`` is
logged as ``reward/acc/mean``. A held-out evaluation counts ``score >= 1`` as correct.
"""

from __future__ import annotations

import re
from typing import Any

from verl.utils.reward_score.math import last_boxed_only_string, remove_boxed

__all__ = ["compute_score", "normalize_final_answer"]

_SUBSTITUTIONS = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
_REMOVED = (
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    '"',
    "\\dots",
)
_ANSWER_LINE = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")


def normalize_final_answer(answer: str) -> str:
    """Minerva's normalisation of a final answer (see the module docstring)."""
    answer = answer.split("=")[-1]
    for before, after in _SUBSTITUTIONS:
        answer = answer.replace(before, after)
    for expression in _REMOVED:
        answer = answer.replace(expression, "")
    answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", answer)  # the first $...$ span
    for wrapper in ("text", "textbf", "overline"):
        answer = re.sub(r"(\\" + wrapper + r"\{)(.*?)(\})", "\\2", answer)
    answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", answer)
    answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", answer)
    answer = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer.strip()


def _minerva(solution: str, ground_truth: str) -> tuple[bool, str]:
    found = _ANSWER_LINE.findall(solution)
    pred = normalize_final_answer(found[-1] if found else "[INVALID]")
    return pred == normalize_final_answer(ground_truth), pred


def _strict_box(solution: str, ground_truth: str, pause_tokens_index: list[int] | None) -> tuple[bool, str | None]:
    tail = solution[pause_tokens_index[-1] + 100 :] if pause_tokens_index else solution[-100:]
    pred = remove_boxed(last_boxed_only_string(tail))
    return pred == ground_truth, pred


def compute_score(
    solution_str: Any,
    ground_truth: Any,
    strict_box_verify: bool = False,
    pause_tokens_index: list[int] | None = None,
) -> dict[str, Any]:
    """``{"score": 1.0 | -1.0, "acc": bool, "pred": str}`` for the response's final answer against ``ground_truth``."""
    if isinstance(solution_str, bytes):
        solution_str = solution_str.decode("utf-8", errors="replace")
    solution = ("" if solution_str is None else str(solution_str))[-300:]
    if strict_box_verify:
        correct, pred = _strict_box(solution, str(ground_truth), pause_tokens_index)
    else:
        correct, pred = _minerva(solution, str(ground_truth))
    return {"score": 1.0 if correct else -1.0, "acc": bool(correct), "pred": "" if pred is None else pred}
