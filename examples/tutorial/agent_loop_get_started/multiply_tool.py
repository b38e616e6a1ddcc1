"""The tool this tutorial writes: exact multiplication of integers, as verl's ``BaseTool``.

The model calls it as ``<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call>``
and reads ``178377``. The tool YAML next to this file (``multiply_tool.yaml``) names the class and gives the schema the
model reads; the agent loop runs ``create`` -> ``execute`` -> ``release`` for every call the model makes.
"""

from __future__ import annotations

import re
from typing import Any

from verl.tools import BaseTool, ToolError, ToolResponse

# "4821*37", "4821 * 37", "-12*3": two integers and one "*"
PRODUCT = re.compile(r"^\s*(-?\d+)\s*\*\s*(-?\d+)\s*$")


class MultiplyTool(BaseTool):
    """``a*b`` for integers of up to ``max_digits`` digits (the YAML's ``config``). Anything else is refused with a
    `ToolError`: the model reads ``Error: <message>`` and the call counts in ``agent_loop/tool_errors``."""

    def __init__(self, config: dict | None, tool_schema: dict | None):
        super().__init__(config, tool_schema)
        self.max_digits = int(self.config.get("max_digits", 12))

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        expression = parameters["expression"]  # the schema makes it a required string; the agent loop checked that
        match = PRODUCT.match(expression)
        if match is None:
            raise ToolError(f"this calculator only multiplies two integers, like 4821*37; got {expression!r}")
        a, b = (int(g) for g in match.groups())
        if max(len(str(abs(a))), len(str(abs(b)))) > self.max_digits:
            raise ToolError(f"factors of at most {self.max_digits} digits")
        product = a * b
        # (what the model reads, a step reward for this call, metrics the step logs)
        return ToolResponse(text=str(product)), 0.0, {"product_digits": len(str(abs(product)))}
