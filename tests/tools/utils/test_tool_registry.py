"""verl's tool YAML: the shipped examples load, and every mistake in a file names the file, the entry and the fix."""

import textwrap
from pathlib import Path

import pytest

from verl.tools import CalculatorTool, KeyValueLookupTool, initialize_tools, initialize_tools_from_config
from verl.tools.function_tool import FunctionTool
from verl.tools.utils.tool_registry import get_tool_class

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "agent_loop" / "tool_configs"


def _yaml(tmp_path, text, name="tools.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_the_shipped_tool_yamls_load():
    (calculator,) = initialize_tools_from_config(EXAMPLES / "calculator.yaml")
    (lookup,) = initialize_tools_from_config(EXAMPLES / "key_value_lookup.yaml")
    assert isinstance(calculator, CalculatorTool) and calculator.name == "calculator"
    assert calculator.config == {
        "type": "native",
        "max_expression_length": 200,
        "max_exponent": 100,
        "max_result_digits": 100,
    }
    assert isinstance(lookup, KeyValueLookupTool) and lookup.name == "key_value_lookup"
    # the YAML spells out each tool's built-in schema: the two stay the same
    assert calculator.tool_schema == CalculatorTool().tool_schema
    assert lookup.tool_schema == KeyValueLookupTool().tool_schema


def test_yaml_and_function_tools_together():
    tools = initialize_tools(str(EXAMPLES / "calculator.yaml"), str(EXAMPLES / "function_tools.py"))
    assert list(tools) == ["calculator", "word_count", "unit_convert"]
    assert isinstance(tools["word_count"], FunctionTool)


def test_a_class_with_its_own_schema_needs_no_tool_schema(tmp_path):
    path = _yaml(
        tmp_path, "tools:\n  - class_name: verl.tools.calculator_tool.CalculatorTool\n    config: {type: native}\n"
    )
    assert [t.name for t in initialize_tools_from_config(path)] == ["calculator"]


SCHEMA = """\
    tool_schema:
      type: function
      function:
        name: calc
        description: d
        parameters: {type: object, properties: {x: {type: string}}, required: [x]}
"""


@pytest.mark.parametrize(
    "body, error, message",
    [
        ("tool: []\n", ValueError, r"needs a top-level 'tools:' list"),
        ("tools:\n  - config: {type: native}\n", ValueError, r"tools\[0\]: each entry needs class_name"),
        (
            "tools:\n  - class_name: no_such_pkg.mod.Tool\n",
            ModuleNotFoundError,
            r"tools\[0\]: class_name 'no_such_pkg.mod.Tool': there is no module 'no_such_pkg'",
        ),
        (
            "tools:\n  - class_name: verl.tools.calculator_tool.Calculator\n",
            ImportError,
            r"tools\[0\]: module 'verl.tools.calculator_tool' defines no class 'Calculator'; its classes: .*CalculatorTool",
        ),
        (
            "tools:\n  - class_name: collections.OrderedDict\n",
            TypeError,
            r"tools\[0\]: collections.OrderedDict is not a verl.tools.base_tool.BaseTool subclass",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n    config: {type: native}\n",
            ValueError,
            r"tools\[0\]: no tool_schema, and verl.tools.base_tool.BaseTool supplies none: add one, shaped \{type: function",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n    config: {type: mcp}\n",
            ValueError,
            r"tools\[0\]: config.type 'mcp' is not supported",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n    mcp: {mcp_servers_config_path: x}\n",
            ValueError,
            r"MCP tools \(an mcp: section\) are not supported",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n    tool_schem: {}\n",
            ValueError,
            r"tools\[0\]: unknown keys \['tool_schem'\]; an entry has class_name, config and tool_schema",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n" + SCHEMA.replace("type: function", "type: func"),
            ValueError,
            r"tools\[0\]: tool_schema does not match the OpenAI function shape \(\(the schema\): type must be "
            r"\"function\"",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n"
            + SCHEMA.replace("{type: object,", "{type: array,"),
            ValueError,
            r"function.parameters: parameters.type must be \"object\"",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n"
            + SCHEMA.replace("required: [x]", "required: [y]"),
            ValueError,
            r"parameters.required names \['y'\], which are not in parameters.properties",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n" + SCHEMA.replace("        description: d\n", ""),
            ValueError,
            r"function.description: Field required",
        ),
        (
            "tools:\n  - class_name: verl.tools.base_tool.BaseTool\n"
            + SCHEMA
            + "  - class_name: verl.tools.base_tool.BaseTool\n"
            + SCHEMA,
            ValueError,
            r"tools\[0\] and tools\[1\] are both named 'calc'; tool names must be unique",
        ),
    ],
)
def test_a_bad_tool_yaml_names_the_file_the_entry_and_the_fix(tmp_path, body, error, message):
    path = _yaml(tmp_path, body)
    with pytest.raises(error, match=message) as info:
        initialize_tools_from_config(path)
    assert path in str(info.value)


def test_a_missing_file_names_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="multi_turn.tool_config_path"):
        initialize_tools_from_config(tmp_path / "nope.yaml")


def test_a_tool_failing_to_build_is_named(tmp_path):
    path = _yaml(
        tmp_path,
        "tools:\n  - class_name: verl.tools.calculator_tool.CalculatorTool\n    config: {max_exponent: lots}\n",
    )
    with pytest.raises(
        ValueError, match=r"tools\[0\]: building verl.tools.calculator_tool.CalculatorTool failed: ValueError"
    ):
        initialize_tools_from_config(path)


def test_a_name_in_both_sources_is_an_error(tmp_path):
    functions = tmp_path / "fns.py"
    functions.write_text(
        'from verl.tools import function_tool\n\n@function_tool\ndef calculator(expression: str) -> str:\n    """Mine."""\n    return "0"\n'
    )
    with pytest.raises(ValueError, match="'calculator' is defined in both tool_config_path"):
        initialize_tools(str(EXAMPLES / "calculator.yaml"), str(functions))


def test_get_tool_class():
    assert get_tool_class("verl.tools.calculator_tool.CalculatorTool") is CalculatorTool


VERL_STYLE_TOOL = '''
import json
from typing import Any

from transformers.utils import get_json_schema

from verl.tools.base_tool import BaseTool, OpenAIFunctionToolSchema
from verl.tools.schemas import ToolResponse


class WeatherTool(BaseTool):
    def get_current_temperature(self, location: str, unit: str = "celsius"):
        """Get current temperature at a location.

        Args:
            location: The location, as "City, Country".
            unit: The unit of the answer. (choices: ["celsius", "fahrenheit"])
        """
        return {"temperature": 26.1, "location": location, "unit": unit}

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return OpenAIFunctionToolSchema(**get_json_schema(self.get_current_temperature))

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs):
        return ToolResponse(text=json.dumps(self.get_current_temperature(**parameters))), 0, {}
'''


def test_a_verl_style_tool_class_and_json_tool_config_port_unchanged(tmp_path, monkeypatch):
    """verl's own agent-loop test writes its tool config as JSON and builds schemas with transformers'
    get_json_schema; both work here as they are."""
    import asyncio
    import json

    from verl.tools import call_tool

    (tmp_path / "weather_tools_module.py").write_text(VERL_STYLE_TOOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "tool_config.json"
    config.write_text(
        json.dumps({"tools": [{"class_name": "weather_tools_module.WeatherTool", "config": {"type": "native"}}]})
    )
    (tool,) = initialize_tools_from_config(str(config))
    assert tool.name == "get_current_temperature"
    unit = tool.tool_schema.function.parameters.properties["unit"]
    assert unit.type == "string" and unit.enum == ["celsius", "fahrenheit"]
    result = asyncio.run(call_tool(tool, '{"location": "Paris, France"}', timeout_s=5))
    assert json.loads(result.response.text) == {"temperature": 26.1, "location": "Paris, France", "unit": "celsius"}
