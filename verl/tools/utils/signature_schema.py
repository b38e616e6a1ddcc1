"""A Python function's OpenAI tool schema, read from its signature and its Google-style docstring.

    def lookup_price(item: str, quantity: int = 1) -> str:
        '''Price of an item in the shop.

        Args:
            item: the item's name, e.g. "apple".
            quantity: how many.
        '''

gives ``{"type": "function", "function": {"name": "lookup_price", "description": "Price of an item in the shop.",
"parameters": {"type": "object", "properties": {"item": {"type": "string", "description": "the item's name, e.g.
\\"apple\\"."}, "quantity": {"type": "integer", "description": "how many."}}, "required": ["item"]}}}``.

Type hints map to JSON types: ``str`` string, ``int`` integer, ``float`` number, ``bool`` boolean, ``list[X]`` /
``tuple[X, ...]`` array (of X), ``dict`` object, ``Literal[...]`` and ``Enum`` subclasses an enum, ``X | None``
X. A parameter with a default is not required. The docstring's first paragraph is the description; its ``Args:``
section (``name: text`` or ``name (type): text``, continuation lines indented) describes the parameters. What the
model cannot be told (no hint, ``Any``, a union of two types, ``*args``, no docstring) is an error naming the
function and the parameter, at decoration time.
"""

from __future__ import annotations

import collections.abc
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from verl.tools.schemas import OpenAIFunctionToolSchema

__all__ = ["function_schema", "json_schema_of", "parse_google_docstring"]

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_ARG_LINE = re.compile(r"^\**(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SCALARS = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _literal_type(values: tuple | list, where: str) -> str:
    kinds = {_SCALARS.get(type(v)) for v in values}
    if len(kinds) != 1 or None in kinds:
        raise TypeError(f"{where}: the values of a Literal/Enum must all be str, all int, all float or all bool")
    return kinds.pop()


def json_schema_of(hint: Any, where: str) -> dict[str, Any]:
    """The JSON schema of one type hint (``where`` names the parameter in errors)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin is typing.Literal:
        return {"type": _literal_type(args, where), "enum": list(args)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        return {"type": _literal_type(values, where), "enum": values}
    if origin in (typing.Union, types.UnionType):
        not_none = [a for a in args if a is not type(None)]
        if len(not_none) == 1:
            return json_schema_of(not_none[0], where)
        raise TypeError(f"{where}: a union of several types ({hint}) has no single JSON type; use one type")
    if hint in (list, tuple, set) or origin in (list, tuple, set, collections.abc.Sequence):
        item_args = [a for a in args if a is not Ellipsis]
        if origin is tuple and len(item_args) > 1 and len(set(item_args)) > 1:
            raise TypeError(f"{where}: a tuple of mixed types ({hint}) has no single JSON item type")
        schema: dict[str, Any] = {"type": "array"}
        if item_args:
            schema["items"] = json_schema_of(item_args[0], where + " (items)")
        return schema
    if hint is dict or origin in (dict, collections.abc.Mapping):
        return {"type": "object"}
    raise TypeError(
        f"{where}: type hint {hint!r} has no JSON type; use str, int, float, bool, list[...], dict, Literal[...] "
        f"or an Enum"
    )


def parse_google_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(summary, {parameter: description})`` of a Google-style docstring: the summary is its first paragraph,
    the descriptions come from the ``Args:`` section (joined continuation lines)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary_lines = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        summary_lines.append(line.strip())
    arg_docs: dict[str, str] = {}
    in_args, current, entry_indent = False, None, None
    for line in lines:
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if indent == 0 and _SECTION.match(line):
            in_args, current, entry_indent = _SECTION.match(line).group(1).lower() in _ARG_SECTIONS, None, None
            continue
        if not in_args or not stripped:
            continue
        if indent == 0:  # text back at the margin ends the section
            in_args, current = False, None
            continue
        if entry_indent is None:
            entry_indent = indent
        match = _ARG_LINE.match(stripped) if indent == entry_indent else None
        if match:
            current = match.group(1)
            arg_docs[current] = match.group(2).strip()
        elif current is not None:
            arg_docs[current] = (arg_docs[current] + " " + stripped).strip()
    return " ".join(summary_lines), arg_docs


def function_schema(
    fn: Callable[..., Any], name: str | None = None, description: str | None = None
) -> OpenAIFunctionToolSchema:
    """The OpenAI tool schema of ``fn`` (``name``/``description`` override the function's name and summary).
    A ``**kwargs`` parameter is left out of the schema: it receives the sample's tool kwargs, not the model's."""
    tool_name = name or fn.__name__
    where = f"@function_tool {tool_name}"
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:
        raise TypeError(f"{where}: its type hints cannot be resolved ({type(e).__name__}: {e})") from e
    summary, arg_docs = parse_google_docstring(inspect.getdoc(fn))
    description = description if description is not None else summary
    if not description:
        raise ValueError(f"{where} has no docstring: its first line is the description the model reads; add one")
    properties: dict[str, dict[str, Any]] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise TypeError(f"{where}: parameter {param.name!r} cannot be passed by name; tools get keyword arguments")
        if param.name not in hints:
            raise TypeError(f"{where}: parameter {param.name!r} has no type hint; annotate it (str, int, float, ...)")
        prop = json_schema_of(hints[param.name], f"{where}, parameter {param.name!r}")
        if arg_docs.get(param.name):
            prop["description"] = arg_docs[param.name]
        properties[param.name] = prop
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    stale = [arg for arg in arg_docs if arg not in properties and arg != "kwargs"]
    if stale:
        raise ValueError(f"{where}: its docstring's Args describe {stale}, which are not parameters; fix the docstring")
    return OpenAIFunctionToolSchema.model_validate(
        {
            "type": "function",
            "function": {
                "name": tool_name,
                "description": description,
                "parameters": {"type": "object", "properties": properties, "required": required},
            },
        }
    )
