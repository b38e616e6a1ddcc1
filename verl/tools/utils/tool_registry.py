"""Tools from verl's tool YAML (``actor_rollout_ref.rollout.multi_turn.tool_config_path``)::

    tools:
      - class_name: verl.tools.calculator_tool.CalculatorTool   # package.module.Class, a BaseTool subclass
        config:
          type: native                                         # verl's tool type (mcp is not supported here)
          max_expression_length: 200                           # the rest goes to the tool as its config
        tool_schema:                                           # the OpenAI function schema the model reads
          type: function
          function:
            name: calculator
            description: Evaluate an arithmetic expression.
            parameters:
              type: object
              properties:
                expression: {type: string, description: "e.g. 4821*37"}
              required: [expression]

``tool_schema`` may be left out for a class that supplies its own (the built-in tools do). Every problem in the
file is an error naming the file, the entry (``tools[2]``) and the fix, raised when the trainer starts.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import ValidationError

from verl.tools.base_tool import BaseTool
from verl.tools.function_tool import load_function_tools
from verl.tools.schemas import OpenAIFunctionToolSchema
from verl.utils.import_utils import load_class_by_name, load_entry_list

__all__ = ["get_tool_class", "initialize_tools", "initialize_tools_from_config", "schema_problems"]

_ENTRY_KEYS = {"class_name", "config", "tool_schema"}
_SHAPE = (
    "{type: function, function: {name: ..., description: ..., parameters: {type: object, properties: "
    "{<param>: {type: string|integer|number|boolean|array|object, description: ...}}, required: [...]}}}"
)


def get_tool_class(cls_name: str) -> type:
    """verl's helper: the class at ``package.module.Class``."""
    return load_class_by_name(cls_name, "tool class")


def schema_problems(error: ValidationError) -> str:
    """A pydantic validation error as ``where: what`` lines a YAML author can act on."""
    parts = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(the schema)"
        parts.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


def _tool_from_entry(entry: Any, where: str) -> BaseTool:
    if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
        raise ValueError(
            f"{where}: each entry needs class_name: package.module.ToolClass "
            f"(e.g. verl.tools.calculator_tool.CalculatorTool), got {entry!r}"
        )
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if "mcp" in unknown:
        raise ValueError(f"{where}: MCP tools (an mcp: section) are not supported in this version; use native tools")
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; an entry has class_name, config and tool_schema")
    config = entry.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"{where}: config must be a mapping (type: native and the tool's settings)")
    tool_type = str(config.get("type", "native")).lower()
    if tool_type != "native":
        raise ValueError(f"{where}: config.type {tool_type!r} is not supported; tools here are type: native (no MCP)")
    cls = load_class_by_name(entry["class_name"], where)
    if not issubclass(cls, BaseTool):
        raise TypeError(f"{where}: {entry['class_name']} is not a verl.tools.base_tool.BaseTool subclass")
    schema = entry.get("tool_schema")
    if schema is not None:
        try:
            schema = OpenAIFunctionToolSchema.model_validate(schema)
        except ValidationError as e:
            raise ValueError(
                f"{where}: tool_schema does not match the OpenAI function shape ({schema_problems(e)}); "
                f"expected {_SHAPE}"
            ) from None
    elif cls.get_openai_tool_schema is BaseTool.get_openai_tool_schema:
        raise ValueError(f"{where}: no tool_schema, and {entry['class_name']} supplies none: add one, shaped {_SHAPE}")
    try:
        return cls(config=config, tool_schema=schema)
    except Exception as e:
        raise ValueError(f"{where}: building {entry['class_name']} failed: {type(e).__name__}: {e}") from e


def initialize_tools_from_config(tools_config_file: str | os.PathLike) -> list[BaseTool]:
    """The tools of a verl tool YAML, in file order (verl's function; names must be unique)."""
    path = os.fspath(tools_config_file)
    entries = load_entry_list(
        path,
        "tools",
        "tool config",
        "actor_rollout_ref.rollout.multi_turn.tool_config_path",
        "class_name, config, tool_schema",
    )
    tools: list[BaseTool] = []
    for index, entry in enumerate(entries):
        tool = _tool_from_entry(entry, f"tool config {path}, tools[{index}]")
        clash = next((i for i, t in enumerate(tools) if t.name == tool.name), None)
        if clash is not None:
            raise ValueError(
                f"tool config {path}: tools[{clash}] and tools[{index}] are both named {tool.name!r}; tool names "
                f"must be unique (the model calls a tool by name)"
            )
        tools.append(tool)
    return tools


def initialize_tools(tool_config_path: str | None = None, function_tool_path: str | None = None) -> dict[str, BaseTool]:
    """All tools of a run by name: the YAML's (``tool_config_path``) and then the ``@function_tool`` functions of
    ``function_tool_path``. A name defined in both is an error."""
    tools: dict[str, BaseTool] = {}
    for tool in initialize_tools_from_config(tool_config_path) if tool_config_path else []:
        tools[tool.name] = tool
    for tool in load_function_tools(function_tool_path) if function_tool_path else []:
        if tool.name in tools:
            raise ValueError(
                f"tool {tool.name!r} is defined in both tool_config_path ({tool_config_path}) and "
                f"function_tool_path ({function_tool_path}); rename one (@function_tool(name=...))"
            )
        tools[tool.name] = tool
    return tools
