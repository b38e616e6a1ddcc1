"""Rule-based scorer for MATH-style answers in ``\\boxed{...}`` (``data_source`` "lighteval/MATH",
"DigitalLearningGmbH/MATH-lighteval" or "HuggingFaceH4/MATH-500"; "math" is DAPO's scorer, as in verl).

The answer is the content of the LAST ``\\boxed{...}`` (or ``\\fbox{...}``, or ``\\boxed x`` without braces) in the
response, braces matched so nested ones such as ``\\boxed{\\frac{1}{2}}`` are read whole. It is equal to the ground
truth when both agree after the normalisation MATH's graders use (Hendrycks et al., 2021), written here from its
description:

* ``\\dfrac`` / ``\\tfrac`` -> ``\\frac``; ``\\frac12`` -> ``\\frac{1}{2}``; ``a/b`` of two integers -> ``\\frac{a}{b}``;
  ``0.5`` -> ``\\frac{1}{2}``; ``\\sqrt3`` -> ``\\sqrt{3}``;
* ``\\left``/``\\right``, ``\\!``, spaces, line breaks, dollar signs, ``\\%``, degrees (``^\\circ``) and a trailing
  ``\\text{ unit}`` are removed; a short ``x = `` prefix is dropped; ``.5`` -> ``0.5``;
* beyond the MATH graders: thousands separators in a plain number (``1,000`` -> ``1000``) and numbers compared by
  value (``3.0`` equals ``3``).

Expressions are compared as normalised text, not symbolically: ``1+\\sqrt{2}`` and ``\\sqrt{2}+1`` differ. A
response without a boxed answer scores 0. Nothing here raises for any input.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["compute_score", "is_equiv", "last_boxed_only_string", "remove_boxed", "strip_string"]

_BOX_COMMANDS = ("\\boxed", "\\fbox")


def last_boxed_only_string(text: str) -> str | None:
    """The last ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` with its braces matched (or ``\\boxed x`` up to the
    next ``$`` or the end), command included; None when there is none or its braces never close."""
    starts = [(text.rfind(cmd), cmd) for cmd in _BOX_COMMANDS]
    start, cmd = max(starts)
    if start < 0:
        return None
    rest = text[start + len(cmd) :]
    if rest.startswith(" ") and not rest.lstrip().startswith("{"):  # "\boxed 5": the token after the space
        return cmd + " " + rest.lstrip().split("$")[0].strip()
    brace = text.find("{", start + len(cmd))
    if brace < 0 or text[start + len(cmd) : brace].strip():
        return None
    close = _matching_brace(text, brace)
    return text[start : close + 1] if close is not None else None


def remove_boxed(boxed: str | None) -> str | None:
    """``\\boxed{x}`` -> ``x`` (and ``\\boxed x`` -> ``x``); None for None or anything else."""
    if boxed is None:
        return None
    for cmd in _BOX_COMMANDS:
        if boxed.startswith(cmd + " "):
            return boxed[len(cmd) + 1 :].strip()
        if boxed.startswith(cmd + "{") and boxed.endswith("}"):
            return boxed[len(cmd) + 1 : -1]
    return None


def _fix_fracs(s: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac1{2}`` -> ``\\frac{1}{2}``, ``\\frac{1}2`` -> ``\\frac{1}{2}``."""
    parts = s.split("\\frac")
    out = parts[0]
    for part in parts[1:]:
        out += "\\frac"
        if part.startswith("{"):
            # numerator already braced; brace a one-character denominator that follows it
            close = _matching_brace(part, 0)
            if close is not None and close + 1 < len(part) and part[close + 1] != "{":
                part = part[: close + 1] + "{" + part[close + 1] + "}" + part[close + 2 :]
            out += part
            continue
        if len(part) < 2:
            return s  # malformed: leave it as it was
        num, rest = part[0], part[1:]
        if rest.startswith("{"):
            out += "{" + num + "}" + rest
        else:
            out += "{" + num + "}{" + rest[0] + "}" + rest[1:]
    return out


def _matching_brace(s: str, open_index: int) -> int | None:
    """The index of the ``}`` closing the ``{`` at ``open_index``, or None when it never closes."""
    depth = 0
    for i in range(open_index, len(s)):
        if s[i] == "{":
            depth += 1
        elif s[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _fix_sqrt(s: str) -> str:
    """``\\sqrt3`` -> ``\\sqrt{3}`` (one character after ``\\sqrt`` without braces)."""
    return re.sub(r"\\sqrt(?!\{)(\w)", r"\\sqrt{\1}", s)


def _fix_slash_fraction(s: str) -> str:
    """``a/b`` of two integers -> ``\\frac{a}{b}``."""
    match = re.fullmatch(r"(-?\d+)/(\d+)", s)
    return f"\\frac{{{match.group(1)}}}{{{match.group(2)}}}" if match else s


def strip_string(s: str) -> str:
    """The normalised form of an answer (see the module docstring)."""
    s = str(s).replace("\n", "").replace("\\!", "")
    s = s.replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "").replace("$", "")
    if "\\text{ " in s:  # a trailing unit: "5 \text{ cm}"
        s = s.split("\\text{ ")[0]
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    s = s.strip()
    if s.startswith("."):
        s = "0" + s
    if s.count("=") == 1 and len(s.split("=")[0].strip()) <= 2:  # "x = 5" -> "5"
        s = s.split("=")[1]
    s = _fix_sqrt(s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):  # 1,000 -> 1000
        s = s.replace(",", "")
    return _fix_slash_fraction(s)


def _as_number(s: str) -> Decimal | None:
    if not re.fullmatch(r"-?\d+(\.\d+)?", s):
        return None
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def is_equiv(answer: str | None, ground_truth: str | None) -> bool:
    """Whether two answers agree after `strip_string` (plain numbers compared by value)."""
    if answer is None or ground_truth is None:
        return False
    a, b = strip_string(answer), strip_string(ground_truth)
    if a == b:
        return True
    na, nb = _as_number(a), _as_number(b)
    return na is not None and nb is not None and na == nb


def compute_score(solution_str: Any, ground_truth: Any, extra_info: Any = None) -> float:
    """1.0 when the response's last boxed answer equals ``ground_truth`` (itself boxed or not), else 0.0."""
    if solution_str is None:
        return 0.0
    if isinstance(solution_str, bytes):
        solution_str = solution_str.decode("utf-8", errors="replace")
    truth = str(ground_truth)
    boxed_truth = remove_boxed(last_boxed_only_string(truth))
    answer = remove_boxed(last_boxed_only_string(str(solution_str)))
    return 1.0 if is_equiv(answer, boxed_truth if boxed_truth is not None else truth) else 0.0
