"""Arithmetic task: ``What is 37 + 48?`` answered by ``37 + 48 = 85\\n#### 85``.

Operands have ``min_digits..max_digits`` digits (1 digit means 0..9, d >= 2 digits means
10**(d-1)..10**d - 1) and each operator comes from ``ops`` (``+``, ``-``, ``*``). Results may be
negative (``-``). The ground truth is the integer result as a string, scored by the strict
``#### N`` arithmetic scorer.

Variants (the learning suite's sibling tasks, ``benchmarks/learning_suite.py``):

* ``terms`` (2..4): operands per problem, ``What is 12 + 34 + 56?``; operators bind as in Python
  (``*`` before ``+``/``-``), and ``mul_digits`` caps the digits of an operand right of a ``*``
  (``37 * 4``: one digit).
* ``style``: the reference response. ``work`` (default) ``12 + 34 + 56 = 102\\n#### 102``;
  ``answer`` only ``#### 102``; ``steps`` one line per partial result, left to right
  (``12 + 34 = 46\\n46 + 56 = 102\\n#### 102``; ``+``/``-`` only).
* ``reward``: ``exact`` (data_source ``arithmetic``) or ``partial`` (data_source
  ``arithmetic_partial``: digit-level partial credit,
  :func:`verl.utils.reward_score.arithmetic.compute_partial_score`).

Two-term problems at the default style keep the rows (and the train/test split) they always had.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from verl.data.tasks.base import TaskParam, TaskSpec, check_int

DATA_SOURCE = "arithmetic"
SUPPORTED_OPS = ("+", "-", "*")
MAX_DIGITS = 9
# Spaces up to this many problems are listed in full (exact size checks, uniform sampling).
ENUMERATE_LIMIT = 200_000


def parse_ops(value: str | Iterable[str]) -> tuple[str, ...]:
    """Parse ``"+,-"``, ``"+-*"`` or ``["+", "-"]`` into canonical order, e.g. ``("+", "-")``."""
    if isinstance(value, str):
        items = [ch for ch in value if ch not in ", \t"]
    else:
        items = [str(v).strip() for v in value]
    bad = sorted({op for op in items if op not in SUPPORTED_OPS})
    if bad or not items:
        raise ValueError(f"ops must be a non-empty selection of {list(SUPPORTED_OPS)}, got {value!r}")
    return tuple(op for op in SUPPORTED_OPS if op in items)


def operand_range(min_digits: int, max_digits: int) -> tuple[int, int]:
    """Inclusive operand range for numbers of ``min_digits..max_digits`` digits."""
    low = 0 if min_digits == 1 else 10 ** (min_digits - 1)
    return low, 10**max_digits - 1


def apply_op(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unsupported op {op!r}")


STYLES = ("work", "answer", "steps")
REWARDS = ("exact", "partial")
MAX_TERMS = 4
PARTIAL_DATA_SOURCE = "arithmetic_partial"

# A problem: operands and operators alternating, ``(a, op, b)`` or ``(a, op, b, op, c, ...)``.
Problem = tuple


def evaluate(problem: Problem) -> int:
    """The value of ``a op b op c ...`` with Python's precedence (``*`` before ``+`` and ``-``)."""
    total, sign, product = 0, 1, problem[0]
    for op, value in zip(problem[1::2], problem[2::2]):
        if op == "*":
            product *= value
            continue
        total += sign * product
        sign, product = (1 if op == "+" else -1), value
    return total + sign * product


def _validate(params: dict[str, Any]) -> dict[str, Any]:
    min_digits = check_int(params, "min_digits", 1, MAX_DIGITS)
    max_digits = check_int(params, "max_digits", 1, MAX_DIGITS)
    if max_digits < min_digits:
        raise ValueError(f"max_digits ({max_digits}) must be >= min_digits ({min_digits})")
    ops = parse_ops(params["ops"])
    terms = check_int(params, "terms", 2, MAX_TERMS)
    raw = params["mul_digits"]
    if isinstance(raw, str):  # from a builtin:// query string or the command line
        raw = None if raw.strip().lower() in ("", "none", "null") else (int(raw) if raw.strip().isdigit() else raw)
    mul_digits = None if raw is None else check_int({"mul_digits": raw}, "mul_digits", 1, MAX_DIGITS)
    style, reward = params["style"], params["reward"]
    if style not in STYLES:
        raise ValueError(f"style must be one of {list(STYLES)}, got {style!r}")
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
    if style == "steps" and "*" in ops:
        raise ValueError("style='steps' writes left-to-right partial results: use it with ops '+' and '-' only")
    if mul_digits is not None and "*" not in ops:
        raise ValueError(f"mul_digits={mul_digits} needs '*' in ops (ops={''.join(ops)!r})")
    checked = {"min_digits": min_digits, "max_digits": max_digits, "ops": ops}
    # options at their defaults stay out, so the classic task's cache identity (and rows) do not change
    extra = {"terms": terms, "mul_digits": mul_digits, "style": style, "reward": reward}
    return checked | {k: v for k, v in extra.items() if v != _EXTRA_DEFAULTS[k]}


def _option(params: Mapping[str, Any], name: str) -> Any:
    return params.get(name, _EXTRA_DEFAULTS[name])


def _mul_range(params: Mapping[str, Any]) -> tuple[int, int]:
    digits = _option(params, "mul_digits")
    return operand_range(1, digits) if digits else operand_range(params["min_digits"], params["max_digits"])


def space_size(params: Mapping[str, Any]) -> int:
    """Number of distinct problems (operand tuples times operator choices)."""
    low, high = operand_range(params["min_digits"], params["max_digits"])
    mul_low, mul_high = _mul_range(params)
    width, mul_width = high - low + 1, mul_high - mul_low + 1
    # each later term is an operator and an operand; '*' may draw from the narrower range
    per_term = sum(mul_width if op == "*" else width for op in params["ops"])
    return width * per_term ** (_option(params, "terms") - 1)


def _key(problem: Problem) -> str:
    return "".join(str(part) for part in problem)


def _enumerate(params: Mapping[str, Any]) -> list[Problem] | None:
    if space_size(params) > ENUMERATE_LIMIT:
        return None
    low, high = operand_range(params["min_digits"], params["max_digits"])
    mul_low, mul_high = _mul_range(params)
    problems: list[Problem] = [(a,) for a in range(low, high + 1)]
    tails = [
        (op, b) for op in params["ops"] for b in (range(mul_low, mul_high + 1) if op == "*" else range(low, high + 1))
    ]
    for _ in range(_option(params, "terms") - 1):
        problems = [p + tail for p in problems for tail in tails]
    if _option(params, "terms") == 2:  # the classic order (operator-major), which fixed the shipped split
        problems.sort(key=lambda p: params["ops"].index(p[1]))
    return problems


def _sample(rng: random.Random, params: Mapping[str, Any]) -> Problem:
    low, high = operand_range(params["min_digits"], params["max_digits"])
    problem: tuple = (rng.randint(low, high),)
    for _ in range(_option(params, "terms") - 1):
        op = rng.choice(params["ops"])
        mul_low, mul_high = _mul_range(params) if op == "*" else (low, high)
        problem += (op, rng.randint(mul_low, mul_high))
    return problem


def _expression(problem: Problem) -> str:
    return " ".join(str(part) for part in problem)


def _render(problem: Problem, rng: random.Random, params: Mapping[str, Any]) -> tuple[str, str, str]:
    result = evaluate(problem)
    style = _option(params, "style")
    if style == "answer":
        work = ""
    elif style == "steps":
        lines, value = [], problem[0]
        for op, operand in zip(problem[1::2], problem[2::2]):
            new = apply_op(value, op, operand)
            lines.append(f"{value} {op} {operand} = {new}")
            value = new
        work = "\n".join(lines) + "\n"
    else:
        work = f"{_expression(problem)} = {result}\n"
    return f"What is {_expression(problem)}?", f"{work}#### {result}", str(result)


def _finish_row(row: dict[str, Any], problem: Problem, params: Mapping[str, Any]) -> dict[str, Any]:
    if _option(params, "reward") == "partial":
        row["data_source"] = PARTIAL_DATA_SOURCE
    return row


_EXTRA_DEFAULTS = {"terms": 2, "mul_digits": None, "style": "work", "reward": "exact"}


TASK = TaskSpec(
    name="arithmetic",
    data_source=DATA_SOURCE,
    ability="math",
    params=(
        TaskParam("min_digits", 2, int, "fewest digits per operand (1 means 0..9)"),
        TaskParam("max_digits", 2, int, "most digits per operand"),
        TaskParam(
            "ops", ("+",), parse_ops, "operators to draw from, e.g. '+,-,*' (write --ops=-,+ if it starts with -)"
        ),
        TaskParam("terms", 2, int, "operands per problem (2..4)"),
        TaskParam("mul_digits", None, str, "most digits of an operand right of '*' (default: as the others)"),
        TaskParam("style", "work", str, "reference response: work | answer | steps"),
        TaskParam("reward", "exact", str, "exact (data_source arithmetic) | partial (arithmetic_partial)"),
    ),
    validate=_validate,
    key=_key,
    enumerate=_enumerate,
    sample=_sample,
    render=_render,
    finish_row=_finish_row,
    enlarge_hint="raise max_digits (or lower min_digits) or add ops, e.g. ops='+,-,*'",
    description="a OP b with small integers; answer '#### N'",
)
