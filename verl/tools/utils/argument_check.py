"""Check a call's arguments against its tool's schema before the tool runs.

A small model's first calls are often wrong (a misspelled parameter, a number where a string belongs); answering
with what was wrong, by name, is an observation it can learn from, where a tool crashing on ``parameters["x"]``
only says ``KeyError``. The check covers what the OpenAI schema states: required names, unknown names (unless
``additionalProperties`` allows them), the JSON type of each value and enum membership. It does not coerce values.
"""

from __future__ import annotations

import json
from typing import Any

from verl.tools.schemas import OpenAIFunctionParametersSchema

__all__ = ["argument_problems", "json_type_name", "without_null_optionals"]

# JSON-schema type -> the Python values json.loads gives for it (bool is not an integer or a number here)
_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def json_type_name(value: Any) -> str:
    """The JSON type of a decoded value, as the model would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _shown(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def argument_problems(parameters: OpenAIFunctionParametersSchema, arguments: dict[str, Any]) -> list[str]:
    """What is wrong with ``arguments`` for a function with these ``parameters``, one line per problem naming the
    parameter (empty: the call is well-formed). A null value for an optional parameter counts as leaving it out."""
    problems = []
    properties = parameters.properties
    for name in parameters.required:
        if name not in arguments:
            problems.append(f"missing required parameter '{name}' ({properties[name].type})")
    allows_extra = (parameters.model_extra or {}).get("additionalProperties") is True
    for name, value in arguments.items():
        prop = properties.get(name)
        if prop is None:
            if not allows_extra:
                known = ", ".join(properties) or "none"
                problems.append(f"unknown parameter '{name}' (its parameters: {known})")
            continue
        if value is None and name not in parameters.required:
            continue
        check = _CHECKS.get(prop.type)
        if check is not None and not check(value):
            problems.append(
                f"parameter '{name}' must be {_article(prop.type)}, got {json_type_name(value)} {_shown(value)}"
            )
        elif prop.enum is not None and value not in prop.enum:
            problems.append(f"parameter '{name}' must be one of {_shown(prop.enum, 120)}, got {_shown(value)}")
    return problems


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


def without_null_optionals(parameters: OpenAIFunctionParametersSchema, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments without optional parameters given as null: models often write ``"unit": null`` for "not
    given", and the tool's own default should then apply."""
    return {k: v for k, v in arguments.items() if v is not None or k in parameters.required}
