"""Tools for multi-turn rollouts (verl's ``verl.tools``): the `BaseTool` lifecycle, ``@function_tool`` functions and
safe execution (`run_tool_call`: argument checks, timeouts, errors as observations)."""

from verl.tools.base_tool import BaseTool, ToolError
from verl.tools.function_tool import FunctionTool, function_tool, load_function_tools
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.tools.tool_call import ToolCallResult, call_tool, run_tool_call, unknown_tool_result

__all__ = [
    "BaseTool",
    "FunctionTool",
    "OpenAIFunctionToolSchema",
    "ToolCallResult",
    "ToolError",
    "ToolResponse",
    "call_tool",
    "function_tool",
    "load_function_tools",
    "run_tool_call",
    "unknown_tool_result",
]
