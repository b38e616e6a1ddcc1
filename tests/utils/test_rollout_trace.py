"""`rollout_trace_op`: untraced without a backend; with Weave one call per traced method, tagged, switchable off.

Weave is not installed here: a small recording stand-in takes its place in ``sys.modules``."""

import asyncio
import sys
import types

import pytest

from verl.utils.rollout_trace import RolloutTraceConfig, rollout_trace_attr, rollout_trace_op


class RecordingWeaveClient:
    def __init__(self):
        self.calls, self.finished = [], []

    def create_call(self, op, inputs, attributes):
        self.calls.append((op, inputs, attributes))
        return len(self.calls) - 1

    def finish_call(self, call, output=None, exception=None):
        self.finished.append((call, output, exception))


@pytest.fixture
def weave(monkeypatch):
    client = RecordingWeaveClient()
    attributes_var = types.SimpleNamespace(value={})

    class CallAttributes:
        def get(self):
            return attributes_var.value

    class Attributes:
        def __init__(self, attrs):
            self.attrs = attrs

        def __enter__(self):
            self.old, attributes_var.value = attributes_var.value, self.attrs

        def __exit__(self, *exc):
            attributes_var.value = self.old

    module = types.ModuleType("weave")
    module.init = lambda project: client
    module.attributes = Attributes
    context = types.ModuleType("weave.trace.context")
    context.call_context = types.SimpleNamespace(call_attributes=CallAttributes())
    monkeypatch.setitem(sys.modules, "weave", module)
    monkeypatch.setitem(sys.modules, "weave.trace.context", context)
    RolloutTraceConfig.reset()
    yield client
    RolloutTraceConfig.reset()


class Agent:
    @rollout_trace_op
    async def act(self, obs, temperature=1.0):
        return f"act({obs})"

    @rollout_trace_op
    def check(self, answer):
        if answer is None:
            raise ValueError("no answer")
        return answer == "4"


def test_no_backend_means_plain_calls():
    RolloutTraceConfig.reset()
    assert asyncio.run(Agent().act("x")) == "act(x)" and Agent().check("4")


def test_weave_records_inputs_outputs_attributes_and_errors(weave):
    RolloutTraceConfig.init("proj", "exp", backend="weave")
    agent = Agent()
    with rollout_trace_attr(step=3, sample_index=7, rollout_n=1):
        assert asyncio.run(agent.act("x")) == "act(x)"
    op, inputs, attributes = weave.calls[0]
    assert op == "Agent.act" and inputs == {"obs": "x", "temperature": 1.0}
    assert attributes == {"step": 3, "sample_index": 7, "rollout_n": 1, "validate": False, "experiment_name": "exp"}
    assert weave.finished[0] == (0, "act(x)", None)
    with pytest.raises(ValueError, match="no answer"):
        agent.check(None)
    assert isinstance(weave.finished[1][2], ValueError)
    with rollout_trace_attr(step=4, trace=False):
        asyncio.run(agent.act("y"))
        agent.check("4")
    assert len(weave.calls) == 2  # nothing traced inside trace=False
