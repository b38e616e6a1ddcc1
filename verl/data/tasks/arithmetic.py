"""Arithmetic task: ``What is 37 + 48?`` answered by ``37 + 48 = 85\\n#### 85``.

Operands have ``min_digits..max_digits`` digits (1 digit means 0..9, d >= 2 digits means
10**(d-1)..10**d - 1) and the operator comes from ``ops`` (``+``, ``-``, ``*``). Results may be
negative (``-``). The ground truth is the integer result as a string, scored by the strict
``#### N`` arithmetic scorer.
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


def _validate(params: dict[str, Any]) -> dict[str, Any]:
    min_digits = check_int(params, "min_digits", 1, MAX_DIGITS)
    max_digits = check_int(params, "max_digits", 1, MAX_DIGITS)
    if max_digits < min_digits:
        raise ValueError(f"max_digits ({max_digits}) must be >= min_digits ({min_digits})")
    return {"min_digits": min_digits, "max_digits": max_digits, "ops": parse_ops(params["ops"])}


def space_size(params: Mapping[str, Any]) -> int:
    """Number of distinct problems (ordered operand pairs times operators)."""
    low, high = operand_range(params["min_digits"], params["max_digits"])
    return len(params["ops"]) * (high - low + 1) ** 2


def _key(problem: tuple[int, str, int]) -> str:
    a, op, b = problem
    return f"{a}{op}{b}"


def _enumerate(params: Mapping[str, Any]) -> list[tuple[int, str, int]] | None:
    if space_size(params) > ENUMERATE_LIMIT:
        return None
    low, high = operand_range(params["min_digits"], params["max_digits"])
    operands = range(low, high + 1)
    return [(a, op, b) for op in params["ops"] for a in operands for b in operands]


def _sample(rng: random.Random, params: Mapping[str, Any]) -> tuple[int, str, int]:
    low, high = operand_range(params["min_digits"], params["max_digits"])
    return rng.randint(low, high), rng.choice(params["ops"]), rng.randint(low, high)


def _render(problem: tuple[int, str, int], rng: random.Random, params: Mapping[str, Any]) -> tuple[str, str, str]:
    a, op, b = problem
    result = apply_op(a, op, b)
    return f"What is {a} {op} {b}?", f"{a} {op} {b} = {result}\n#### {result}", str(result)


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
    ),
    validate=_validate,
    key=_key,
    enumerate=_enumerate,
    sample=_sample,
    render=_render,
    enlarge_hint="raise max_digits (or lower min_digits) or add ops, e.g. ops='+,-,*'",
    description="a OP b with small integers; answer '#### N'",
)
