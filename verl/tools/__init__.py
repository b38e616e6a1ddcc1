"""Tools for multi-turn rollouts (verl's ``verl.tools``): the `BaseTool` lifecycle, verl's tool YAML, ``@function_tool``
functions, safe execution (`run_tool_call`: argument checks, timeouts, errors as observations) and the built-in
``calculator``, ``key_value_lookup`` and ``code_interpreter`` (Python in the sandbox) tools. docs/tools.md."""

from verl.tools.base_tool import BaseTool, ToolError
from verl.tools.calculator_tool import CalculatorTool
from verl.tools.function_tool import FunctionTool, function_tool, load_function_tools
from verl.tools.key_value_lookup_tool import KeyValueLookupTool
from verl.tools.sandbox_fusion_tools import SandboxFusionTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.tools.tool_call import ToolCallResult, call_tool, run_tool_call, unknown_tool_result
from verl.tools.utils.tool_registry import initialize_tools, initialize_tools_from_config

__all__ = [
    "BaseTool",
    "CalculatorTool",
    "FunctionTool",
    "KeyValueLookupTool",
    "OpenAIFunctionToolSchema",
    "SandboxFusionTool",
    "ToolCallResult",
    "ToolError",
    "ToolResponse",
    "call_tool",
    "function_tool",
    "initialize_tools",
    "initialize_tools_from_config",
    "load_function_tools",
    "run_tool_call",
    "unknown_tool_result",
]
