"""Evaluate an arithmetic expression the model wrote, without ``eval``.

The expression is parsed with ``ast`` and only these nodes are evaluated: int and float literals, ``+ - * / // %
**``, unary ``-`` and ``+``, parentheses (which ``ast`` resolves). A name, call, attribute, string, comparison or
any other syntax is refused by name, so ``__import__('os')`` never runs. Work is bounded: the expression's length,
the exponent of ``**`` (checked before computing), and the number of digits of every intermediate integer (a power
is refused before it is computed when ``bits(base) * exponent`` already exceeds the limit), so ``9**99**99`` is a
refusal, not a hang.
"""

from __future__ import annotations

import ast
import math
import operator

__all__ = ["ArithmeticRefusal", "evaluate_arithmetic", "format_number"]

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_BITS_PER_DIGIT = math.log2(10)
_NOT_ALLOWED = {
    ast.BitXor: "^ (write powers as **)",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Not: "not",
    ast.Name: "a name",
    ast.Call: "a function call",
    ast.Attribute: "an attribute",
    ast.Subscript: "indexing",
    ast.Compare: "a comparison",
    ast.BoolOp: "and/or",
    ast.Lambda: "a lambda",
}


class ArithmeticRefusal(ValueError):
    """The expression is not plain arithmetic, or its result is out of bounds; the message says which."""


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Constant):
        return f"the {type(node.value).__name__} literal {node.value!r}"
    return _NOT_ALLOWED.get(type(node), type(node).__name__)


class _Evaluator:
    def __init__(self, max_exponent: int, max_digits: int):
        self.max_exponent = max_exponent
        self.max_digits = max_digits
        self.max_bits = math.ceil(max_digits * _BITS_PER_DIGIT)
        self.bound = 10**max_digits  # the smallest integer with one digit too many

    def checked(self, value: int | float | complex) -> int | float:
        if isinstance(value, complex):
            raise ArithmeticRefusal("the result is not a real number (a fractional power of a negative number)")
        if isinstance(value, float) and not math.isfinite(value):
            raise ArithmeticRefusal("the result is too large for a floating-point number")
        if isinstance(value, int) and abs(value) >= self.bound:
            raise ArithmeticRefusal(f"a result has more than {self.max_digits} digits")
        return value

    def power(self, base: int | float, exponent: int | float) -> int | float:
        if abs(exponent) > self.max_exponent:
            raise ArithmeticRefusal(f"the exponent {exponent} is larger than {self.max_exponent}")
        if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
            if (abs(base).bit_length() - 1) * exponent > self.max_bits:
                raise ArithmeticRefusal(
                    f"the result of {base}**{exponent} would have more than {self.max_digits} digits"
                )
        return base**exponent

    def eval(self, node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                return self.checked(node.value)
            raise ArithmeticRefusal(f"only numbers are allowed, found {_describe(node)}")
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self.eval(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.eval(node.left), self.eval(node.right)
            try:
                value = self.power(left, right) if isinstance(node.op, ast.Pow) else _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ArithmeticRefusal("division by zero") from None
            except OverflowError:
                raise ArithmeticRefusal("the result is too large for a floating-point number") from None
            return self.checked(value)
        op = getattr(node, "op", None)
        found = _describe(op) if op is not None and type(op) in _NOT_ALLOWED else _describe(node)
        raise ArithmeticRefusal(f"only numbers, + - * / // % ** and parentheses are allowed, found {found}")


def evaluate_arithmetic(
    expression: str, max_length: int = 200, max_exponent: int = 100, max_digits: int = 100
) -> int | float:
    """The value of ``expression``; `ArithmeticRefusal` (a ValueError) says why there is none."""
    if not isinstance(expression, str) or not expression.strip():
        raise ArithmeticRefusal("the expression is empty")
    if len(expression) > max_length:
        raise ArithmeticRefusal(f"the expression is {len(expression)} characters long; the limit is {max_length}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ArithmeticRefusal(f"cannot parse {expression.strip()!r} as arithmetic ({e.msg})") from None
    try:
        return _Evaluator(max_exponent, max_digits).eval(tree)
    except RecursionError:
        raise ArithmeticRefusal("the expression is nested too deeply") from None


def format_number(value: int | float) -> str:
    """How the calculator prints a result: an integer, or an integral float below 2**53, as digits (``2`` for
    ``6/3``); any other float with up to 15 significant digits (``0.3`` for ``0.1+0.2``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.15g}"
    return str(value)
