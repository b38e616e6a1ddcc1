"""The tools and simulated users of a run, loaded once per process from ``rollout.multi_turn``'s files.

- ``tool_config_path``: verl's tool YAML (``tools: [{class_name, config, tool_schema}]``), and
  ``function_tool_path``: a file of ``@function_tool`` functions, through ``verl.tools.initialize_tools``;
- ``interaction_config_path``: verl's interaction YAML (``interaction: [{name, class_name, config}]``), through
  ``verl.interactions.utils.interaction_registry.initialize_interactions_from_config``.

Tools and interactions keep per-trajectory state under instance ids, so one object serves every trajectory of every
step (verl builds them per trajectory; the result is the same, without re-reading the files each time).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["load_interactions", "load_tools", "tool_schemas"]

_lock = threading.Lock()
_tools: dict[str, dict[str, Any]] = {}
_interactions: dict[str, dict[str, Any]] = {}


def load_tools(tool_config_path: str | None, function_tool_path: str | None = None) -> dict[str, Any]:
    """Tool name -> tool (verl ``BaseTool``) of the tool YAML and the ``@function_tool`` file; {} when neither is
    set (``verl.tools.initialize_tools``)."""
    if not tool_config_path and not function_tool_path:
        return {}
    key = f"{tool_config_path}|{function_tool_path}"
    with _lock:
        if key not in _tools:
            from verl.tools.utils.tool_registry import initialize_tools

            _tools[key] = initialize_tools(tool_config_path, function_tool_path)
        return _tools[key]


def tool_schemas(tools: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools' OpenAI function schemas, as ``apply_chat_template(tools=...)`` takes them."""
    schemas = []
    for tool in tools.values():
        schema = tool.get_openai_tool_schema() if hasattr(tool, "get_openai_tool_schema") else tool.tool_schema
        schemas.append(
            schema.model_dump(exclude_unset=True, exclude_none=True) if hasattr(schema, "model_dump") else schema
        )
    return schemas


def load_interactions(path: str | None) -> dict[str, Any]:
    """Interaction name -> interaction (verl ``BaseInteraction``) of the YAML at ``path``; {} when empty."""
    if not path:
        return {}
    with _lock:
        if path not in _interactions:
            from verl.interactions.utils.interaction_registry import initialize_interactions_from_config

            _interactions[path] = dict(initialize_interactions_from_config(path))
        return _interactions[path]
