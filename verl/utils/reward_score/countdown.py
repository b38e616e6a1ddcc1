"""Rule-based scorer for the built-in countdown task (``data_source`` "countdown").

The task: combine ALL the given numbers, each exactly once, with ``+ - * /`` and
parentheses to reach the target.

Accepted format
---------------
The response ends with the expression after a ``####`` marker::

    25 - 5 = 20, and 20 * 3 = 60.
    #### (25 - 5) * 3

* The expression is the text after the LAST ``####`` up to the end of that line.
  Surrounding whitespace and trailing dots are ignored, and so is one trailing
  ``= <integer>`` (``"#### (25 - 5) * 3 = 60"`` is read as ``(25 - 5) * 3``; the
  claimed result itself is not checked, the expression's value is).
* Fullwidth forms and Unicode decimal digits are mapped to ASCII as in
  :func:`verl.utils.reward_score.gsm8k.normalize_digits`, and ``×``/``÷``/``−``
  are read as ``*``/``/``/``-``.
* Only non-negative integer literals written in plain decimal, binary ``+ - * /``,
  unary minus and parentheses are allowed. Anything else (names, calls, ``**``,
  ``//``, ``%``, floats, ``=`` elsewhere, ...) makes the expression unparsable.
  The expression is parsed with :mod:`ast` and never passed to ``eval``; it is
  capped at :data:`MAX_EXPRESSION_CHARS` characters and :data:`MAX_AST_NODES`
  AST nodes, so inputs such as ``"2**99999"`` or ``"9" * 10000`` are rejected
  before any arithmetic happens.
* Evaluation is exact with :class:`fractions.Fraction` (``7 / 2`` is 7/2, not
  3.5 or 3); division by zero makes the answer wrong.

Ground truth
------------
``{"target": int, "numbers": [int, ...]}``, also accepted as a JSON (or Python
literal) string, with ``numbers`` as any iterable such as a numpy array (as read
back from parquet) and numpy/float-but-integral values. Numbers are expected to
be non-negative, since literals in the expression are. A malformed ground truth
is a data bug and raises ``ValueError``.

Scoring
-------
* the multiset of literals equals ``numbers`` AND the value equals ``target``
  -> ``score`` (default 1.0)
* an expression parsed but used the wrong numbers, divided by zero or missed
  the target -> ``format_score`` (default 0.0)
* no ``####`` or nothing parsable after it -> 0.0

Never raises for any ``solution_str`` (``None`` is treated as ``""``).
"""

from __future__ import annotations

import ast
import json
import numbers as _numbers
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from verl.utils.reward_score.gsm8k import _as_text, normalize_digits

__all__ = [
    "MAX_AST_NODES",
    "MAX_EXPRESSION_CHARS",
    "compute_score",
    "evaluate_equation",
    "extract_solution",
    "validate_equation",
]

#: Longest expression (in characters, after stripping) that is parsed at all.
MAX_EXPRESSION_CHARS = 200
#: Largest AST (node count, operators included) that is evaluated.
MAX_AST_NODES = 256

_MARKER = "####"
_ALLOWED_CHARS = frozenset("0123456789+-*/() \t")
_EXTRA_OPERATORS = str.maketrans({"\u00d7": "*", "\u00f7": "/", "\u2212": "-"})
_TRAILING_RESULT = re.compile(r"\s*=\s*[-+]?[0-9]+\s*$")
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub)


class _Invalid(Exception):
    """Internal: the expression is not allowed or cannot be evaluated."""


def _normalize_expression(expr: str) -> str:
    return normalize_digits(expr).translate(_EXTRA_OPERATORS).strip()


def _parse(expr: Any) -> ast.Expression | None:
    """Parse a (normalised) expression safely; ``None`` if it is not allowed."""
    if not isinstance(expr, str):
        return None
    if len(expr) > 4 * MAX_EXPRESSION_CHARS:  # cheap early exit before normalising
        return None
    text = _normalize_expression(expr)
    if not text or len(text) > MAX_EXPRESSION_CHARS or not _ALLOWED_CHARS.issuperset(text):
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    count = 0
    for node in ast.walk(tree):
        count += 1
        if count > MAX_AST_NODES or not isinstance(node, _ALLOWED_NODES):
            return None
        if isinstance(node, ast.Constant) and type(node.value) is not int:
            return None
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.USub):
            return None
        if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
            return None
    return tree


def _literals(tree: ast.Expression) -> list[int]:
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)]


def _eval_node(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body)
    if isinstance(node, ast.Constant):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp):
        return -_eval_node(node.operand)
    if isinstance(node, ast.BinOp):
        left = _eval_node(node.left)
        right = _eval_node(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise _Invalid("division by zero")
        return left / right
    raise _Invalid(f"unexpected node {type(node).__name__}")


def _evaluate_tree(tree: ast.Expression) -> Fraction | None:
    try:
        return _eval_node(tree)
    except (_Invalid, RecursionError, MemoryError, OverflowError, ZeroDivisionError):
        return None


def _to_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"countdown {what} must be an integer, got {value!r}")
    if isinstance(value, _numbers.Integral):
        return int(value)
    if isinstance(value, _numbers.Real) and float(value).is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"countdown {what} must be an integer, got {value!r}")


def _parse_ground_truth(ground_truth: Any) -> tuple[int, list[int]]:
    gt = ground_truth
    if isinstance(gt, bytes | bytearray):
        gt = bytes(gt).decode("utf-8", errors="replace")
    if isinstance(gt, str):
        try:
            gt = json.loads(gt)
        except ValueError:
            try:
                gt = ast.literal_eval(gt.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                raise ValueError(
                    f"countdown ground_truth string is neither JSON nor a Python literal: {ground_truth!r}"
                ) from None
    if not isinstance(gt, Mapping) or "target" not in gt or "numbers" not in gt:
        raise ValueError(
            f'countdown ground_truth must be {{"target": int, "numbers": [int, ...]}}, got {ground_truth!r}'
        )
    pool = gt["numbers"]
    if hasattr(pool, "tolist"):  # numpy array
        pool = pool.tolist()
    if isinstance(pool, str | bytes) or not isinstance(pool, Iterable):
        raise ValueError(f"countdown ground_truth 'numbers' must be a list of integers, got {pool!r}")
    return _to_int(gt["target"], "target"), [_to_int(n, "number") for n in pool]


def extract_solution(solution_str: str | None) -> str | None:
    """Return the expression after the last ``####`` (to the end of that line).

    Fullwidth/Unicode digits and ``× ÷ −`` are normalised, surrounding whitespace
    and trailing dots are stripped, and one trailing ``= <integer>`` is removed.
    Returns ``None`` if there is no marker or nothing follows it. The result is
    not validated; see :func:`evaluate_equation` / :func:`validate_equation`.
    """
    text = _as_text(solution_str)
    text = normalize_digits(text)
    pos = text.rfind(_MARKER)
    if pos < 0:
        return None
    start = pos + len(_MARKER)
    end = text.find("\n", start)
    line = text[start:] if end < 0 else text[start:end]
    if len(line) > 4 * MAX_EXPRESSION_CHARS:
        return line.strip() or None  # too long to be valid; skip the regex below
    expr = line.translate(_EXTRA_OPERATORS).strip().rstrip(".").rstrip()
    expr = _TRAILING_RESULT.sub("", expr).strip()
    return expr or None


def evaluate_equation(expr: str) -> Fraction | None:
    """Evaluate an allowed expression exactly.

    Returns the value as a :class:`~fractions.Fraction`, or ``None`` if the
    expression is not allowed (see module docstring), too long/large, or
    divides by zero. Never raises.
    """
    tree = _parse(expr)
    if tree is None:
        return None
    return _evaluate_tree(tree)


def validate_equation(expr: str, numbers: Iterable[int]) -> bool:
    """Return True iff ``expr`` is allowed and uses exactly ``numbers``.

    "Exactly" means the multiset of integer literals equals the multiset of
    ``numbers``: each number used once and all of them used. ``numbers`` may be
    any iterable of integers (e.g. a numpy array). Never raises for a bad
    ``expr``; returns False if ``numbers`` does not hold integers.
    """
    tree = _parse(expr)
    if tree is None:
        return False
    try:
        pool = numbers.tolist() if hasattr(numbers, "tolist") else numbers
        expected = Counter(_to_int(n, "number") for n in pool)
    except (ValueError, TypeError):
        return False
    return Counter(_literals(tree)) == expected


def compute_score(
    solution_str: str | None,
    ground_truth: Any,
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    """Score a countdown response ending in ``#### <expression>``.

    Args:
        solution_str: the model response.
        ground_truth: ``{"target": int, "numbers": [int, ...]}`` (dict, JSON string,
            numpy arrays allowed).
        format_score: reward for a parsable expression that is wrong.
        score: reward for a correct expression.

    Returns:
        ``score`` if the expression uses exactly the given numbers and evaluates
        to the target; ``format_score`` if it parsed but is wrong; else ``0.0``.

    Raises:
        ValueError: if ``ground_truth`` is malformed (never because of ``solution_str``).
    """
    target, pool = _parse_ground_truth(ground_truth)
    tree = _parse(extract_solution(solution_str))
    if tree is None:
        return 0.0
    if Counter(_literals(tree)) != Counter(pool):
        return float(format_score)
    value = _evaluate_tree(tree)
    if value is None or value != target:
        return float(format_score)
    return float(score)
