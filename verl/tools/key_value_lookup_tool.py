"""The built-in ``key_value_lookup`` tool: look a key up in a table that belongs to the sample.

Each data row carries its own table, so the answer exists only in the tool (the model cannot have memorised it)::

    extra_info:
      tools_kwargs:
        key_value_lookup:
          create_kwargs:
            table: {"alice": "Paris", "bob": "Lima"}

Call: ``{"name": "key_value_lookup", "arguments": {"key": "bob"}}``; answer: ``Lima`` (a non-text value answers
as its JSON text). An unknown key answers ``Error: no such key: carol; keys are alice, bob``. Keys match exactly
after stripping surrounding whitespace. The tool YAML's ``config.table`` is the table of rows that bring none.

The table may be a mapping, a JSON object's text, or a list of ``[key, value]`` pairs or ``{"key": ..., "value":
...}`` records. Parquet stores a column of mappings as one struct type with every row's keys, filling the keys a
row lacks with null; so keys whose value is null are dropped, and the text or list forms avoid the issue entirely.

Tool YAML: ``examples/agent_loop/tool_configs/key_value_lookup.yaml``.
"""

from __future__ import annotations

import json
from typing import Any

from verl.tools.base_tool import BaseTool, ToolError
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

__all__ = ["KEY_VALUE_LOOKUP_SCHEMA", "KeyValueLookupTool"]

KEY_VALUE_LOOKUP_SCHEMA = {
    "type": "function",
    "function": {
        "name": "key_value_lookup",
        "description": "Look up the value stored under a key in this task's table.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "description": "The key to look up."}},
            "required": ["key"],
        },
    },
}
MAX_KEYS_SHOWN = 20  # an unknown key lists at most this many keys: a large table would flood the context


class KeyValueLookupTool(BaseTool):
    """One table per instance, given at ``create``."""

    def __init__(self, config: dict | None = None, tool_schema: OpenAIFunctionToolSchema | dict | None = None):
        super().__init__(config, tool_schema)
        self.default_table = self.config.get("table")
        self._tables: dict[str, dict[str, Any]] = {}

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return getattr(self, "tool_schema", None) or OpenAIFunctionToolSchema.model_validate(KEY_VALUE_LOOKUP_SCHEMA)

    async def create(
        self, instance_id: str | None = None, create_kwargs: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[str, ToolResponse]:
        """The table comes as ``create_kwargs={"table": ...}`` (verl's agent loop) or ``table=...`` (verl's older
        rollouts), else from the YAML's ``config.table``."""
        instance_id, response = await super().create(instance_id)
        given = (create_kwargs or {}).get("table", kwargs.get("table"))
        table = _as_table(given if given is not None else self.default_table)
        if table is None:
            raise ValueError(
                f"{self.name} needs a table: give extra_info.tools_kwargs.{self.name}.create_kwargs.table (a mapping "
                f"of key to value, its JSON text, or a list of [key, value] pairs) in the data row, or config.table "
                f"in the tool YAML; got {given!r}"
            )
        self._tables[instance_id] = table
        return instance_id, response

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        if instance_id not in self._tables:
            raise RuntimeError(f"{self.name}: instance {instance_id!r} was not created (or already released)")
        table = self._tables[instance_id]
        key = str(parameters.get("key", "")).strip()
        if key not in table:
            keys = list(table)
            shown = ", ".join(keys[:MAX_KEYS_SHOWN]) + (
                f", ... ({len(keys) - MAX_KEYS_SHOWN} more)" if len(keys) > MAX_KEYS_SHOWN else ""
            )
            raise ToolError(f"no such key: {key}; keys are {shown or '(none: the table is empty)'}")
        value = table[key]
        return ToolResponse(text=value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)), 0.0, {}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._tables.pop(instance_id, None)


def _as_table(value: Any) -> dict[str, Any] | None:
    """The table in any of its accepted forms, keys stripped and null values dropped; None if it is none of them."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list):
        pairs = []
        for item in value:
            if isinstance(item, dict) and "key" in item:
                pairs.append((item["key"], item.get("value")))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                pairs.append(tuple(item))
            else:
                return None
        value = dict(pairs)
    if not isinstance(value, dict):
        return None
    return {str(k).strip(): v for k, v in value.items() if v is not None}
