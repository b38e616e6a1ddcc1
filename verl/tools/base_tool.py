"""verl's tool interface (``verl.tools.base_tool.BaseTool``): the lifecycle the agent loop drives for each call.

For every call the model makes, the agent loop runs ``create`` (with the sample's
``extra_info.tools_kwargs[name]["create_kwargs"]``), ``execute`` (the model's arguments), and ``release``;
``calc_reward`` lets a tool score its state. A tool class ported from verl runs here unchanged.

A tool reports a problem the model should read (a bad expression, a missing key) by raising `ToolError`: the model
sees ``Error: <message>`` as the tool's answer and the call counts as a tool error. Any other exception is a bug in the
tool, shown to the model with its type (``verl.tools.tool_call.run_tool_call`` never lets one end the run).
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import uuid4

from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

__all__ = ["BaseTool", "ToolError"]

logger = logging.getLogger(__name__)


class ToolError(Exception):
    """A problem with the call itself, told to the model as ``Error: <message>`` (no exception type, no trace)."""


class BaseTool:
    """A tool: its OpenAI schema and the per-call lifecycle ``create`` -> ``execute`` -> ``release``.

    Args:
        config: the tool's ``config`` section of the tool YAML (``type: native`` and the tool's own settings).
        tool_schema: the OpenAI function schema (a model or its dict). None: the subclass's
            ``get_openai_tool_schema()`` supplies it.
    """

    def __init__(self, config: dict | None, tool_schema: OpenAIFunctionToolSchema | dict | None):
        self.config = dict(config or {})
        if isinstance(tool_schema, dict):
            tool_schema = OpenAIFunctionToolSchema.model_validate(tool_schema)
        self.tool_schema = tool_schema
        if self.tool_schema is None:
            self.tool_schema = self.get_openai_tool_schema()
        if self.tool_schema is None:
            raise ValueError(
                f"{type(self).__name__} has no tool schema: give tool_schema in the tool YAML (or to the "
                f"constructor), or override get_openai_tool_schema() to return one"
            )
        self.name: str = self.tool_schema.function.name
        logger.debug("tool %s: %s", self.name, self.tool_schema.model_dump(exclude_unset=True, exclude_none=True))

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema | None:
        """The schema the model reads. Subclasses with a fixed schema override this; the base returns the one it
        was given."""
        return getattr(self, "tool_schema", None)

    async def create(self, instance_id: str | None = None, **kwargs) -> tuple[str, ToolResponse]:
        """Start an instance (per-call state). verl's agent loop passes the sample's kwargs as
        ``create_kwargs={...}``; older verl rollouts passed them as keywords. Returns the instance id (a new uuid
        when none is given) and an optional response (empty here)."""
        return (instance_id if instance_id is not None else str(uuid4())), ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        """Run the call: ``(response the model reads, step reward, metrics)``. ``parameters`` are the model's
        arguments, already checked against the schema when run through ``run_tool_call``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement execute(instance_id, parameters)")

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        """A reward from the instance's state (0 unless a tool scores something)."""
        return 0.0

    async def release(self, instance_id: str, **kwargs) -> None:
        """Drop the instance's state."""
