"""Rule-based scorer for GSM8K-style answers (``data_source`` "openai/gsm8k" or "gsm8k").

Accepted format
---------------
The response states its final answer after a ``####`` marker, as in the GSM8K
reference solutions::

    Natalia sold 48 / 2 = 24 clips in May, so 48 + 24 = 72 in total.
    #### 72

* ``method="strict"``: the answer is the number right after the LAST ``####``
  marker in the text (spaces/tabs and an optional ``$`` may sit in between; an
  optional ``+``/``-`` sign is kept). If that last marker is not followed by a
  number there is no answer, even when an earlier marker was. Unlike public
  verl, which only looks at the last 300 characters, the whole text is searched
  (``str.rfind`` is fast on long outputs), so a marker followed by more than 300
  characters of trailing text still counts.
* ``method="flexible"``: the answer is the last number anywhere in the text.

A "number" is a run of digits, ``,`` and ``.``; commas are dropped
(``"1,234"`` is 1234, and, as in verl, ``"1,2"`` is 12), trailing dots are dropped
(``"72."`` is 72), and what remains must be an integer or a decimal such as
``"-3.5"`` or ``".5"`` (``"1.2.3"`` is not a number). A minus sign directly
after a letter, digit or ``)`` is read as a hyphen/subtraction, not a sign, in
flexible mode (``"5-3"`` yields 3, ``"x = -3"`` yields -3).

Unicode digits
--------------
Before parsing, fullwidth ASCII forms (``"８５"``, ``"＃＃＃＃"``) are mapped to
ASCII, every other Unicode decimal digit (category ``Nd``, e.g. Arabic-Indic
``"٨٥"`` or Devanagari ``"८५"``) is mapped to its ASCII digit, and the minus sign
U+2212 becomes ``-``. Full NFKC normalisation is deliberately NOT applied, because
it would also turn superscripts and similar signs into digits (``"m²"`` would
become ``"m2"`` and create a spurious last number).

Scoring
-------
Answers are compared numerically and exactly with :class:`decimal.Decimal`
(never through ``float``): ``"85.0"``, ``"085"`` and ``"85"`` are all equal, and
``"123456789012345678901234567890"`` differs from ``...891``. If the ground
truth is not a number, the cleaned strings are compared instead.

* correct answer -> ``score`` (default 1.0)
* a number was found but it is wrong -> ``format_score`` (default 0.0)
* no number found -> 0.0

Nothing here raises for any ``solution_str``: ``None`` is treated as ``""``,
bytes are decoded as UTF-8 and other objects are converted with ``str``.
"""

from __future__ import annotations

import numbers
import re
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["compute_score", "extract_solution", "normalize_digits", "to_decimal"]

_METHODS = ("strict", "flexible")

# Fullwidth ASCII forms (U+FF01..U+FF5E), the minus sign, and non-ASCII decimal
# digits (``\d`` on a str pattern is exactly Unicode category Nd).
_NON_ASCII_DIGITISH = re.compile(r"[\uFF01-\uFF5E\u2212]|(?![0-9])\d")

_STRICT_MARKER = "####"
_STRICT_AFTER_MARKER = re.compile(r"[ \t]*\$?[ \t]*([-+]?[0-9.,]+)")
# Linear-time token pattern (no nested quantifiers, so no catastrophic backtracking).
_FLEXIBLE_TOKEN = re.compile(r"(?:(?<![0-9A-Za-z)])-)?[0-9.,]+")
_VALID_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _as_text(value: Any) -> str:
    """Coerce a response/ground truth to ``str`` without ever raising."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:
        return ""


def _map_digitish(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if 0xFF01 <= code <= 0xFF5E:
        return chr(code - 0xFEE0)
    if code == 0x2212:
        return "-"
    digit = unicodedata.decimal(ch, None)
    return ch if digit is None else str(digit)


def normalize_digits(text: str) -> str:
    """Map fullwidth ASCII forms, Unicode decimal digits and U+2212 to ASCII.

    Every mapping is one character to one character, so positions are preserved.
    Pure-ASCII text is returned unchanged without scanning.
    """
    if text.isascii():
        return text
    return _NON_ASCII_DIGITISH.sub(_map_digitish, text)


def _clean_number(token: str) -> str | None:
    """Drop commas and trailing dots; return the token if it is a valid number."""
    cleaned = token.replace(",", "").rstrip(".")
    if _VALID_NUMBER.fullmatch(cleaned) is None:
        return None
    return cleaned


def _extract_strict(text: str) -> str | None:
    pos = text.rfind(_STRICT_MARKER)
    if pos < 0:
        return None
    match = _STRICT_AFTER_MARKER.match(text, pos + len(_STRICT_MARKER))
    if match is None:
        return None
    return _clean_number(match.group(1))


def _extract_flexible(text: str) -> str | None:
    last: str | None = None
    for match in _FLEXIBLE_TOKEN.finditer(text):
        cleaned = _clean_number(match.group())
        if cleaned is not None:
            last = cleaned
    return last


def extract_solution(solution_str: str | None, method: str = "strict") -> str | None:
    """Extract the final numeric answer from a response.

    Args:
        solution_str: the model response (``None`` is treated as ``""``).
        method: ``"strict"`` (number after the last ``####``) or ``"flexible"``
            (last number anywhere); see the module docstring.

    Returns:
        The answer as a cleaned ASCII string (commas and trailing dots removed,
        e.g. ``"1234"`` or ``"-3.5"``), or ``None`` if there is none.

    Raises:
        ValueError: if ``method`` is not ``"strict"`` or ``"flexible"``.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    text = normalize_digits(_as_text(solution_str))
    if method == "strict":
        return _extract_strict(text)
    return _extract_flexible(text)


def to_decimal(value: Any) -> Decimal | None:
    """Convert an answer or ground truth to an exact :class:`~decimal.Decimal`.

    Accepts ints (including numpy integers and ints too long for ``str``), floats
    (via their shortest ``str`` form, so ``72.0`` -> ``Decimal("72.0")``) and
    strings in the number format described in the module docstring (surrounding
    whitespace and ``$`` are ignored, commas dropped). Returns ``None`` for
    anything else; never raises.
    """
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, numbers.Integral):
            return Decimal(int(value))
        if isinstance(value, float):
            return Decimal(str(value))
        text = normalize_digits(_as_text(value)).strip().replace("$", "").strip()
        cleaned = _clean_number(text)
        if cleaned is None:
            return None
        return Decimal(cleaned)
    except (InvalidOperation, ValueError, TypeError, OverflowError):
        return None


def _answers_equal(answer: str, ground_truth: Any) -> bool:
    """Exact numeric comparison; falls back to string equality for non-numeric truths."""
    expected = to_decimal(ground_truth)
    if expected is None:
        gt_text = _as_text(ground_truth)
        if _STRICT_MARKER in gt_text:
            # A full GSM8K reference solution ("... #### 72") was passed as the truth.
            expected = to_decimal(_extract_strict(normalize_digits(gt_text)))
    if expected is None:
        return answer == normalize_digits(_as_text(ground_truth)).strip().replace(",", "")
    got = to_decimal(answer)
    if got is None:
        return False
    try:
        return got == expected
    except (InvalidOperation, ValueError, TypeError):
        return False


def compute_score(
    solution_str: str | None,
    ground_truth: Any,
    method: str = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    """Score a GSM8K-style response.

    Args:
        solution_str: the model response; see the module docstring for the format.
        ground_truth: the reference answer, e.g. ``"72"`` (ints/floats also work,
            and so does a full reference solution ending in ``#### 72``).
        method: ``"strict"`` or ``"flexible"`` answer extraction.
        format_score: reward for a parsable but wrong answer.
        score: reward for a correct answer.

    Returns:
        ``score`` if the extracted answer equals the ground truth exactly as a
        decimal number, ``format_score`` if an answer was extracted but is wrong,
        and ``0.0`` if no answer could be extracted.
    """
    answer = extract_solution(solution_str, method=method)
    if answer is None:
        return 0.0
    return float(score) if _answers_equal(answer, ground_truth) else float(format_score)
