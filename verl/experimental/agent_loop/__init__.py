"""verl's agent loop (``verl.experimental.agent_loop``): multi-turn rollouts with tools over the rollout's async
``generate``. Parsers of the model's tool calls: `tool_parser`."""

from verl.experimental.agent_loop.tool_parser import FunctionCall, HermesToolParser, ParsedToolCalls, ToolParser

__all__ = ["FunctionCall", "HermesToolParser", "ParsedToolCalls", "ToolParser"]
