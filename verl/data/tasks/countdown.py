"""Countdown task: combine the given numbers, each exactly once, with + - * / to hit a target.

Prompt: ``Use 3, 5, 2 to make 16. Each number once, + - * /.``; reference response:
``(3 + 5) * 2 = 16\\n#### (3 + 5) * 2``; ground truth ``{"target": 16, "numbers": [3, 5, 2]}``.

Every problem has a solution by construction: problems come from expression trees over the
numbers whose intermediate values are all positive integers (exact division, no zero or negative
values, as in the game) and whose result is in ``1..max_target``. A problem is the multiset of
numbers plus the target (the order shown in the prompt is not part of its identity). Small spaces
are listed in full by a reachability search over subsets (uniform over problems, exact size
checks); large ones are sampled by building random expression trees.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from itertools import combinations_with_replacement
from math import comb
from typing import Any

from verl.data.tasks.base import TaskParam, TaskSpec, check_int

DATA_SOURCE = "countdown"
OPS = ("+", "-", "*", "/")
MAX_NUMBERS = 6
# Full listing is used for at most 4 numbers and at most this many number multisets.
ENUMERATE_MAX_NUMBERS = 4
ENUMERATE_MULTISET_LIMIT = {2: 100_000, 3: 20_000, 4: 2_000}

# An expression tree: a number (leaf) or (op, left, right).
Expr = int | tuple[str, "Expr", "Expr"]
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def combine(a: int, op: str, b: int) -> int | None:
    """``a op b`` if it is a positive integer (Countdown rules), else ``None``."""
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        return a - b if a > b else None
    if op == "/":
        return a // b if a % b == 0 else None
    raise ValueError(f"unsupported op {op!r}")


def format_expr(expr: Expr) -> str:
    """Render a tree with the fewest parentheses that keep its meaning, e.g. ``(3 + 5) * 2``."""
    return _format(expr)[0]


def _format(expr: Expr) -> tuple[str, int]:
    if isinstance(expr, int):
        return str(expr), 3
    op, left, right = expr
    prec = _PRECEDENCE[op]
    left_text, left_prec = _format(left)
    right_text, right_prec = _format(right)
    if left_prec < prec:
        left_text = f"({left_text})"
    if right_prec < prec or (right_prec == prec and op in "-/"):
        right_text = f"({right_text})"
    return f"{left_text} {op} {right_text}", prec


def evaluate_expr(expr: Expr) -> int | None:
    """Value of a tree under Countdown rules (``None`` if some step is not a positive integer)."""
    if isinstance(expr, int):
        return expr
    op, left, right = expr
    a, b = evaluate_expr(left), evaluate_expr(right)
    if a is None or b is None:
        return None
    return combine(a, op, b)


def reachable(numbers: tuple[int, ...]) -> dict[int, Expr]:
    """Every value reachable using all of ``numbers`` once each, with one witness tree per value."""
    n = len(numbers)
    full = (1 << n) - 1
    table: dict[int, dict[int, Expr]] = {1 << i: {} for i in range(n)}
    for i, number in enumerate(numbers):
        table[1 << i].setdefault(number, number)
    for mask in range(1, full + 1):
        if mask in table:
            continue
        values: dict[int, Expr] = {}
        sub = (mask - 1) & mask
        while sub:
            left_values, right_values = table[sub], table[mask ^ sub]
            for a, left in left_values.items():
                for b, right in right_values.items():
                    for op in OPS:
                        value = combine(a, op, b)
                        if value is not None and value not in values:
                            values[value] = (op, left, right)
            sub = (sub - 1) & mask
        table[mask] = values
    return table[full]


def _validate(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "num_numbers": check_int(params, "num_numbers", 2, MAX_NUMBERS),
        "max_number": check_int(params, "max_number", 1),
        "max_target": check_int(params, "max_target", 1),
    }


def multiset_count(params: Mapping[str, Any]) -> int:
    """How many multisets of ``num_numbers`` numbers from ``1..max_number`` exist."""
    return comb(params["max_number"] + params["num_numbers"] - 1, params["num_numbers"])


def _key(problem: tuple[tuple[int, ...], int, Expr]) -> str:
    numbers, target, _ = problem
    return ",".join(str(v) for v in sorted(numbers)) + f"={target}"


def _enumerate(params: Mapping[str, Any]) -> list[tuple[tuple[int, ...], int, Expr]] | None:
    n = params["num_numbers"]
    if n > ENUMERATE_MAX_NUMBERS or multiset_count(params) > ENUMERATE_MULTISET_LIMIT[n]:
        return None
    problems = []
    for numbers in combinations_with_replacement(range(1, params["max_number"] + 1), n):
        witnesses = reachable(numbers)
        for target in sorted(v for v in witnesses if v <= params["max_target"]):
            problems.append((numbers, target, witnesses[target]))
    return problems


def _sample(rng: random.Random, params: Mapping[str, Any]) -> tuple[tuple[int, ...], int, Expr] | None:
    """Draw numbers, combine random pairs with random ops; ``None`` if the tree breaks a rule."""
    numbers = tuple(rng.randint(1, params["max_number"]) for _ in range(params["num_numbers"]))
    items: list[tuple[int, Expr]] = [(v, v) for v in numbers]
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        (a, left), (b, right) = items[i], items[j]
        op = rng.choice(OPS)
        value = combine(a, op, b)
        if value is None:
            return None
        items = [item for k, item in enumerate(items) if k not in (i, j)] + [(value, (op, left, right))]
    value, expr = items[0]
    if not 1 <= value <= params["max_target"]:
        return None
    return numbers, value, expr


def _render(
    problem: tuple[tuple[int, ...], int, Expr], rng: random.Random, params: Mapping[str, Any]
) -> tuple[str, str, dict[str, Any]]:
    numbers, target, expr = problem
    shown = list(numbers)
    rng.shuffle(shown)
    solution = format_expr(expr)
    question = f"Use {', '.join(str(v) for v in shown)} to make {target}. Each number once, + - * /."
    return question, f"{solution} = {target}\n#### {solution}", {"target": target, "numbers": shown}


TASK = TaskSpec(
    name="countdown",
    data_source=DATA_SOURCE,
    ability="math",
    params=(
        TaskParam("num_numbers", 3, int, "how many numbers each problem gives"),
        TaskParam("max_number", 20, int, "numbers are drawn from 1..max_number"),
        TaskParam("max_target", 100, int, "targets are in 1..max_target"),
    ),
    validate=_validate,
    key=_key,
    enumerate=_enumerate,
    sample=_sample,
    render=_render,
    enlarge_hint="raise max_number, max_target or num_numbers",
    description="reach a target with the given numbers, each once, + - * /; answer '#### EXPR'",
)
