"""The built-in ``calculator`` tool: exact arithmetic the model can call instead of computing in its head.

Call: ``<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call>``; answer:
``178377``. Integers are exact at any size up to ``max_result_digits``; ``/`` is true division (``6/3`` answers
``2``, ``7/2`` answers ``3.5``). A refused expression answers ``Error: <why>`` (`verl.tools.utils.safe_arithmetic`).

Tool YAML: ``examples/agent_loop/tool_configs/calculator.yaml``; its config keys (all optional):
``max_expression_length`` (200), ``max_exponent`` (100), ``max_result_digits`` (100), and ``latency_s`` (none):
``[low, high]`` makes every call wait a seeded ``uniform(low, high)`` seconds first (``latency_seed``, default 0,
with the expression: the same call always waits as long), standing in for a slow environment (a sandbox run, a web
tool) in benchmarks of asynchronous training (``examples/agent_loop/tool_configs/slow_calculator.yaml``).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from verl.tools.base_tool import BaseTool, ToolError
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.tools.utils.safe_arithmetic import ArithmeticRefusal, evaluate_arithmetic, format_number

__all__ = ["CALCULATOR_SCHEMA", "CalculatorTool"]

CALCULATOR_SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression exactly and return its value.",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "Numbers with + - * / // % ** and parentheses, e.g. 4821*37",
                }
            },
            "required": ["expression"],
        },
    },
}


class CalculatorTool(BaseTool):
    """Stateless: ``create``/``release`` are the base class's."""

    def __init__(self, config: dict | None = None, tool_schema: OpenAIFunctionToolSchema | dict | None = None):
        super().__init__(config, tool_schema)
        self.max_expression_length = int(self.config.get("max_expression_length", 200))
        self.max_exponent = int(self.config.get("max_exponent", 100))
        self.max_result_digits = int(self.config.get("max_result_digits", 100))
        latency = self.config.get("latency_s")
        if latency is not None and (len(latency) != 2 or not 0 <= float(latency[0]) <= float(latency[1])):
            raise ValueError(f"calculator tool: latency_s={latency!r}: give [low, high] seconds with 0 <= low <= high")
        self.latency_s = None if latency is None else (float(latency[0]), float(latency[1]))
        self.latency_seed = int(self.config.get("latency_seed", 0))

    def call_latency(self, expression: Any) -> float:
        """The seconds a call with ``expression`` waits (0 without ``latency_s``): the same for the same call."""
        if self.latency_s is None:
            return 0.0
        low, high = self.latency_s
        return random.Random(f"{self.latency_seed}:{expression}").uniform(low, high)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return getattr(self, "tool_schema", None) or OpenAIFunctionToolSchema.model_validate(CALCULATOR_SCHEMA)

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        expression = parameters.get("expression")
        if self.latency_s is not None:
            await asyncio.sleep(self.call_latency(expression))
        try:
            value = evaluate_arithmetic(
                expression, self.max_expression_length, self.max_exponent, self.max_result_digits
            )
        except ArithmeticRefusal as e:
            raise ToolError(str(e)) from None
        return ToolResponse(text=format_number(value)), 0.0, {}
