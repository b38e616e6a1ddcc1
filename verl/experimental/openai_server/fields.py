"""Reading one JSON request body field by field: each getter checks the type and range and, on bad input, raises a
`RequestError` naming the field, what it must be and what it got -- never a bare 500 or a silent default.

Unknown fields are refused by `check_known` (OpenAI's own API does the same), so a sampling option this server does
not implement is a 400 naming it instead of being ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from verl.experimental.openai_server.errors import RequestError

__all__ = ["check_known", "get_bool", "get_int_list", "get_number", "get_str", "get_str_list", "require_neutral"]

_MISSING = object()


def check_known(body: Mapping[str, Any], known: Iterable[str], endpoint: str) -> None:
    known = tuple(known)
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise RequestError(
            f"{endpoint}: field {unknown[0]!r} is not supported by this server; supported: {', '.join(sorted(known))}",
            param=unknown[0],
        )


def _got(value: Any) -> str:
    return f"{value!r}" if isinstance(value, str | int | float | bool) or value is None else type(value).__name__


def get_number(
    body: Mapping[str, Any],
    key: str,
    default: Any,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> Any:
    """``body[key]`` as an int (``integer``) or float within ``[low, high]`` (``(low, high]`` with ``low_open``);
    absent or null: ``default``."""
    value = body.get(key, _MISSING)
    if value is _MISSING or value is None:
        return default
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not float(value).is_integer()):
        raise RequestError(f"{key!r} must be {kind}, got {_got(value)}", param=key)
    if not math.isfinite(value):
        raise RequestError(f"{key!r} must be finite, got {value!r}", param=key)
    value = int(value) if integer else float(value)
    too_low = low is not None and (value <= low if low_open else value < low)
    if too_low or (high is not None and value > high):
        bounds = f"{'(' if low_open else '['}{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        raise RequestError(f"{key!r} must be in {bounds}, got {value!r}", param=key)
    return value


def get_bool(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, _MISSING)
    if value is _MISSING or value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(f"{key!r} must be true or false, got {_got(value)}", param=key)
    return value


def get_str(body: Mapping[str, Any], key: str, default: str | None) -> str | None:
    value = body.get(key, _MISSING)
    if value is _MISSING or value is None:
        return default
    if not isinstance(value, str):
        raise RequestError(f"{key!r} must be a string, got {_got(value)}", param=key)
    return value


def get_str_list(body: Mapping[str, Any], key: str) -> list[str]:
    """A string or a list of strings (OpenAI's ``stop``); absent or null: []."""
    value = body.get(key)
    if value is None:
        return []
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise RequestError(f"{key!r} must be a string or a list of strings, got {_got(value)}", param=key)
    if any(v == "" for v in values):
        raise RequestError(f"{key!r} holds an empty string, which would stop before the first token", param=key)
    return list(values)


def get_int_list(body: Mapping[str, Any], key: str) -> list[int]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RequestError(f"{key!r} must be a list of integers, got {_got(value)}", param=key)
    return list(value)


def require_neutral(body: Mapping[str, Any], key: str, neutral: tuple, why: str) -> None:
    """``body[key]`` may only be absent or one of ``neutral`` (values that change nothing)."""
    if key in body and body[key] not in neutral:
        shown = " or ".join(repr(v) for v in neutral if v is not None) or "null"
        raise RequestError(f"{key!r}={_got(body[key])} is not supported: only {shown} ({why})", param=key)
