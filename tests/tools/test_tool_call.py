"""run_tool_call / call_tool: whatever a tool or the model does, the call ends with an observation the model can
read, an error kind the agent loop can count, and the event loop free for the other trajectories."""

import asyncio
import threading
import time

import pytest

from verl.tools import BaseTool, ToolError, ToolResponse, call_tool, function_tool, run_tool_call, unknown_tool_result
from verl.tools.tool_call import MAX_ERROR_CHARS

ECHO_SCHEMA = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Repeat a text.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "times": {"type": "integer"},
                "mode": {"type": "string", "enum": ["plain", "loud"]},
            },
            "required": ["text"],
        },
    },
}


class ScriptedTool(BaseTool):
    """A tool whose execute does what the test says, and which records its lifecycle."""

    def __init__(self, behaviour):
        super().__init__({"type": "native"}, ECHO_SCHEMA)
        self.behaviour = behaviour
        self.events = []

    async def create(self, instance_id=None, create_kwargs=None, **kwargs):
        instance_id, response = await super().create(instance_id)
        self.events.append(("create", create_kwargs))
        return instance_id, response

    async def execute(self, instance_id, parameters, **kwargs):
        self.events.append(("execute", parameters, kwargs))
        return await self.behaviour(parameters)

    async def release(self, instance_id, **kwargs):
        self.events.append(("release", kwargs))


def run(coro):
    return asyncio.run(coro)


async def _echo(parameters):
    return ToolResponse(text=parameters["text"] * parameters.get("times", 1)), 0.5, {"chars": len(parameters["text"])}


def test_a_good_call_returns_the_tools_answer_reward_and_metrics():
    result = run(run_tool_call(ScriptedTool(_echo), "i0", '{"text": "ab", "times": 2}', timeout_s=5))
    assert result.error is None and result.error_kind is None
    assert result.response.text == "abab" and result.reward == 0.5 and result.metrics == {"chars": 2}
    assert 0 <= result.latency_s < 5


def test_a_raising_tool_is_an_exception_observation():
    async def boom(parameters):
        raise ZeroDivisionError("division by zero")

    result = run(run_tool_call(ScriptedTool(boom), "i0", {"text": "x"}, timeout_s=5))
    assert result.error_kind == "exception"
    assert result.response.text == "Error: echo raised ZeroDivisionError: division by zero"
    assert result.error == result.response.text and result.reward == 0.0 and result.metrics == {}


def test_a_long_exception_message_is_clipped():
    async def verbose(parameters):
        raise RuntimeError("x" * 5000)

    result = run(run_tool_call(ScriptedTool(verbose), "i0", {"text": "x"}, timeout_s=5))
    assert len(result.response.text) == MAX_ERROR_CHARS and result.response.text.endswith("...")


def test_a_tool_error_is_shown_as_its_message():
    async def refuse(parameters):
        raise ToolError("no such key: z; keys are a, b")

    result = run(run_tool_call(ScriptedTool(refuse), "i0", {"text": "x"}, timeout_s=5))
    assert result.error_kind == "tool_error" and result.response.text == "Error: no such key: z; keys are a, b"


@pytest.mark.parametrize(
    "returned, message",
    [
        (None, "Error: echo returned NoneType from execute, not (response, reward, metrics)"),
        ((ToolResponse(text="a"), 0.0), "Error: echo returned a 2-tuple from execute, not (response, reward, metrics)"),
        ((object(), 0.0, {}), "Error: echo returned object, not a text answer"),
        ((ToolResponse(text="a"), "high", {}), "Error: echo returned a str reward, not a number"),
        ((ToolResponse(text="a"), 1.0, [1]), "Error: echo returned list metrics, not a dict"),
    ],
)
def test_junk_returns_are_bad_return_observations(returned, message):
    async def junk(parameters):
        return returned

    result = run(run_tool_call(ScriptedTool(junk), "i0", {"text": "x"}, timeout_s=5))
    assert result.error_kind == "bad_return" and result.response.text == message


@pytest.mark.parametrize(
    "returned, text",
    [("plain text", "plain text"), ({"text": "as fields"}, "as fields"), ({"n": 1}, '{"n": 1}')],
)
def test_str_and_dict_answers_are_accepted(returned, text):
    async def answer(parameters):
        return returned, 1, None

    result = run(run_tool_call(ScriptedTool(answer), "i0", {"text": "x"}, timeout_s=5))
    assert result.error is None and result.response.text == text and result.reward == 1.0 and result.metrics == {}


def test_an_async_tool_past_its_timeout_is_cancelled_and_reported():
    cancelled = []

    async def sleepy(parameters):
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main():
        result = await run_tool_call(ScriptedTool(sleepy), "i0", {"text": "x"}, timeout_s=0.2)
        await asyncio.sleep(0)  # let the cancellation land
        return result

    start = time.perf_counter()
    result = run(main())
    assert time.perf_counter() - start < 2
    assert result.error_kind == "timeout" and result.response.text == "Error: echo timed out after 0.2 s"
    assert 0.2 <= result.latency_s < 2 and cancelled == [True]


def test_a_tool_cancelling_itself_does_not_cancel_the_caller():
    async def self_cancelling(parameters):
        raise asyncio.CancelledError()

    result = run(run_tool_call(ScriptedTool(self_cancelling), "i0", {"text": "x"}, timeout_s=5))
    assert result.error_kind == "exception" and result.response.text == "Error: echo was cancelled"


def test_a_tools_own_timeout_error_is_an_exception_not_our_timeout():
    async def upstream_timeout(parameters):
        raise TimeoutError("upstream service timed out")

    result = run(run_tool_call(ScriptedTool(upstream_timeout), "i0", {"text": "x"}, timeout_s=5))
    assert result.error_kind == "exception"
    assert result.response.text == "Error: echo raised TimeoutError: upstream service timed out"


def test_a_hung_sync_function_tool_times_out_without_blocking_the_event_loop():
    release = threading.Event()

    @function_tool
    def hang(seconds: float) -> str:
        """Block the calling thread.

        Args:
            seconds: how long at most.
        """
        release.wait(seconds)
        return "woke"

    async def main():
        hung = asyncio.create_task(run_tool_call(hang, "i0", {"seconds": 30}, timeout_s=0.2))
        quick = await run_tool_call(ScriptedTool(_echo), "i1", {"text": "ok"}, timeout_s=5)
        quick_done_first = not hung.done()
        return await hung, quick, quick_done_first

    start = time.perf_counter()
    hung, quick, quick_done_first = run(main())
    release.set()  # let the abandoned thread finish
    assert time.perf_counter() - start < 2
    assert quick.response.text == "ok" and quick_done_first
    assert hung.error_kind == "timeout" and hung.response.text == "Error: hang timed out after 0.2 s"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({}, "Error: bad arguments for echo: missing required parameter 'text' (string)"),
        (
            {"text": "a", "txet": "b"},
            "Error: bad arguments for echo: unknown parameter 'txet' (its parameters: text, times, mode)",
        ),
        ({"text": 5}, "Error: bad arguments for echo: parameter 'text' must be a string, got integer 5"),
        (
            {"text": "a", "times": True},
            "Error: bad arguments for echo: parameter 'times' must be an integer, got boolean true",
        ),
        (
            {"text": "a", "times": 1.5},
            "Error: bad arguments for echo: parameter 'times' must be an integer, got number 1.5",
        ),
        (
            {"text": "a", "mode": "quiet"},
            'Error: bad arguments for echo: parameter \'mode\' must be one of ["plain", "loud"], got "quiet"',
        ),
        (
            {"times": "2", "x": 1},
            "Error: bad arguments for echo: missing required parameter 'text' (string); parameter 'times' must be an "
            "integer, got string \"2\"; unknown parameter 'x' (its parameters: text, times, mode)",
        ),
        ('{"text": ', "Error: arguments for echo are not valid JSON (Expecting value)"),
        ("[1, 2]", "Error: arguments for echo must be a JSON object"),
    ],
)
def test_bad_arguments_name_the_parameter_and_never_reach_the_tool(arguments, message):
    tool = ScriptedTool(_echo)
    result = run(run_tool_call(tool, "i0", arguments, timeout_s=5))
    assert result.error_kind == "bad_arguments" and result.response.text == message
    assert tool.events == []


def test_a_null_optional_argument_is_left_out():
    tool = ScriptedTool(_echo)
    result = run(run_tool_call(tool, "i0", {"text": "a", "times": None}, timeout_s=5))
    assert result.error is None and tool.events == [("execute", {"text": "a"}, {})]


def test_call_tool_runs_the_lifecycle_with_the_samples_kwargs():
    tool = ScriptedTool(_echo)
    tool_kwargs = {"create_kwargs": {"seed": 1}, "execute_kwargs": {"ctx": 2}, "release_kwargs": {"why": "done"}}
    result = run(call_tool(tool, '{"text": "hi"}', tool_kwargs, timeout_s=5, agent_data="A"))
    assert result.response.text == "hi"
    assert tool.events == [
        ("create", {"seed": 1}),
        ("execute", {"text": "hi"}, {"ctx": 2, "agent_data": "A"}),
        ("release", {"why": "done"}),
    ]


def test_call_tool_releases_after_a_failed_execute():
    async def boom(parameters):
        raise ValueError("bad")

    tool = ScriptedTool(boom)
    result = run(call_tool(tool, {"text": "hi"}, None, timeout_s=5))
    assert result.error_kind == "exception" and [e[0] for e in tool.events] == ["create", "execute", "release"]


def test_a_failing_create_is_an_observation_and_skips_the_call():
    class NoTable(ScriptedTool):
        async def create(self, instance_id=None, create_kwargs=None, **kwargs):
            raise ValueError("needs a table")

    tool = NoTable(_echo)
    result = run(call_tool(tool, {"text": "hi"}, {}, timeout_s=5))
    assert result.error_kind == "exception" and result.response.text == "Error: echo raised ValueError: needs a table"
    assert tool.events == []


def test_unknown_tool_lists_the_tools():
    result = unknown_tool_result("calc", {"key_value_lookup": None, "calculator": None})
    assert result.error_kind == "unknown_tool"
    assert result.response.text == "Error: there is no tool named 'calc'; the tools are: calculator, key_value_lookup"


def test_a_base_tool_without_execute_is_reported_not_raised():
    class Unfinished(BaseTool):
        pass

    result = run(run_tool_call(Unfinished({}, ECHO_SCHEMA), "i0", {"text": "x"}, timeout_s=5))
    assert result.error_kind == "exception"
    assert (
        result.response.text
        == "Error: echo raised NotImplementedError: Unfinished does not implement execute(instance_id, parameters)"
    )
