"""The code_interpreter tool (verl's SandboxFusionTool) on the local sandbox: output, errors as observations, a
time-out that ends the call and not the run, verl's tool YAML loading it."""

import asyncio
import os

import pytest

from verl.sandbox import bwrap_status
from verl.tools import call_tool, initialize_tools_from_config
from verl.tools.sandbox_fusion_tools import SandboxFusionTool

pytestmark = pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
YAML = os.path.join(
    os.path.dirname(__file__), "..", "..", "examples", "agent_loop", "tool_configs", "python_interpreter.yaml"
)


def run(tool, code, **kw):
    return asyncio.run(call_tool(tool, {"code": code}, timeout_s=30, **kw))


@pytest.mark.slow
def test_output_errors_and_timeouts_are_observations():
    tool = SandboxFusionTool({"default_timeout": 2})
    assert tool.name == "code_interpreter"
    ok = run(tool, "print(4821 * 37)")
    assert ok.error is None and ok.response.text == "178377\n" and ok.metrics == {"status": "ok"}
    crash = run(tool, "print('before')\n1 / 0")
    assert crash.error is None and crash.response.text.startswith("before\nError (runtime_error):")
    assert "ZeroDivisionError" in crash.response.text
    assert "Error (syntax error)" in run(tool, "def f(:").response.text
    loop = run(tool, "while True: pass")
    assert loop.response.text.startswith("Error (timed out after 2 s)") and loop.latency_s < 10
    assert run(tool, "x = 1").response.text == "(no output)"
    bad = asyncio.run(call_tool(tool, {"code": ""}, timeout_s=5))
    assert bad.error is not None and "non-empty string" in bad.response.text


def test_concurrent_calls_are_bounded_and_all_answered():
    tool = SandboxFusionTool({"num_workers": 2})

    async def many():
        return await asyncio.gather(*(call_tool(tool, {"code": f"print({i} * 2)"}, timeout_s=30) for i in range(6)))

    assert [r.response.text for r in asyncio.run(many())] == [f"{i * 2}\n" for i in range(6)]


def test_verl_tool_yaml_loads_it():
    (tool,) = initialize_tools_from_config(YAML)
    assert isinstance(tool, SandboxFusionTool) and tool.sandbox_fusion_url == "" and tool.default_timeout == 30
    assert tool.get_openai_tool_schema().function.parameters.required == ["code"]
