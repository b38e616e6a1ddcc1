"""``tool_agent`` on a scripted policy: what the loop does with the model's calls -- failing tools, malformed and
unknown calls, limits, the response budget, interactions and the tools' lifecycle -- and that the batch always
completes, with every failure in the observations the model reads and in the metrics."""

from __future__ import annotations

import random
import time

import pytest
from agent_loop_helpers import (
    JunkTool,
    RaisingTool,
    ScriptedPolicy,
    SleepyTool,
    SmallTool,
    job_config,
    prompt_batch,
)

from verl.experimental.agent_loop import AgentLoopManager, register
from verl.experimental.agent_loop.metrics import agent_loop_metrics
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools import ToolResponse
from verl.utils.model import ASSETS_DIR, load_tokenizer

TOOLS: dict[str, list] = {}  # the tools each test's loop uses, by test


@register("test_scripted_tools_agent")
class ScriptedToolsAgent(ToolAgentLoop):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, tools=TOOLS["current"], interactions=TOOLS.get("interactions", {}), **kwargs)


def call(name: str, **arguments) -> str:
    import json

    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(f"{ASSETS_DIR}/tiny-qwen2-arith-sft")


def run(tokenizer, turns, tools, *overrides, rows=2, interactions=None, **columns):
    TOOLS["current"], TOOLS["interactions"] = tools, interactions or {}
    config = job_config(
        "actor_rollout_ref.rollout.agent.default_agent_loop=test_scripted_tools_agent",
        "actor_rollout_ref.rollout.response_length=400",
        "data.max_response_length=400",
        *overrides,
    )
    policy = ScriptedPolicy(tokenizer, turns)
    manager = AgentLoopManager(config, server_handles=[policy], tokenizer=tokenizer)
    random.seed(0)
    out = manager.generate_sequences(prompt_batch(tokenizer, rows, **columns))
    return out, policy


def transcript(tokenizer, out, row=0):
    side = out.batch["attention_mask"][row, out.batch["prompts"].shape[1] :].bool()
    return tokenizer.decode(out.batch["responses"][row][side])


def observation_text(tokenizer, out, row=0):
    """The response tokens with mask 0 (tool and user turns), decoded."""
    side = out.batch["attention_mask"][row, out.batch["prompts"].shape[1] :].bool()
    mask = out.batch["response_mask"][row].bool()
    return tokenizer.decode(out.batch["responses"][row][side & ~mask])


def test_failing_tools_and_bad_calls_become_observations_and_metrics_and_the_batch_completes(tokenizer):
    tools = [RaisingTool("raiser"), JunkTool("junk"), SleepyTool("sleeper"), SmallTool("echo")]
    turns = [
        call("raiser") + call("junk") + call("sleeper") + '<tool_call>{"name": oops</tool_call>',
        call("no_such_tool", x=1),
        call("echo", expression="4821*37"),
        "#### 42",
    ]
    overrides = [
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=3",
        "actor_rollout_ref.rollout.multi_turn.tool_timeout_s=0.2",
        "actor_rollout_ref.rollout.response_length=1024",
        "data.max_response_length=1024",
    ]
    start = time.perf_counter()
    out, _ = run(tokenizer, turns, tools, *overrides)
    assert time.perf_counter() - start < 10  # the sleeping tool was cut at its 0.2 s timeout, not awaited
    seen = observation_text(tokenizer, out)
    assert "Error: raiser raised RuntimeError: the service is down" in seen
    assert "Error: junk returned dict from execute, not (response, reward, metrics)" in seen
    assert "Error: sleeper timed out after 0.2 s" in seen
    assert "Error: malformed tool call: tool call is not valid JSON" in seen
    assert "Error: there is no tool named 'no_such_tool'; the tools are: echo, junk, raiser, sleeper" in seen
    assert 'echo: {"expression": "4821*37"}' in seen
    assert out.non_tensor_batch["finish_reason"].tolist() == ["stop", "stop"]
    m = agent_loop_metrics(out.non_tensor_batch)
    assert m["agent_loop/num_tool_calls/mean"] == 6  # 3 run + 1 malformed, 1 unknown, 1 echo
    assert {k.rsplit("/", 1)[1]: v for k, v in m.items() if k.startswith("agent_loop/tool_errors/") and v} == {
        "mean": 5,
        "total": 10,
        "malformed": 2,
        "unknown_tool": 2,
        "exception": 2,
        "timeout": 2,
        "bad_return": 2,
    }
    assert m["agent_loop/tool_error_rate"] == pytest.approx(5 / 6)
    assert 0.2 <= m["agent_loop/tool_latency_s/max"] < 5
    assert m["num_turns/mean"] == 8  # prompt + 4 model turns + 3 tool turns
    assert m["agent_loop/tokenization_mismatch"] == 0.0
    assert out.non_tensor_batch["tool_rewards"][0] == [0.25]  # the one call that answered


def test_arguments_that_do_not_fit_the_schema_are_answered_without_running_the_tool(tokenizer):
    parameters = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
    strict = SmallTool("strict", parameters)
    out, _ = run(tokenizer, [call("strict", wrong=1), "ok"], [strict], rows=1)
    assert strict.calls == []
    assert "Error: bad arguments for strict: missing required parameter 'expression'" in observation_text(
        tokenizer, out
    )
    assert agent_loop_metrics(out.non_tensor_batch)["agent_loop/tool_errors/bad_arguments"] == 1


def test_the_mask_is_one_exactly_on_the_model_turns(tokenizer):
    turns = [call("echo", a=1), "done"]
    out, policy = run(tokenizer, turns, [SmallTool("echo")], rows=1)
    first = tokenizer(turns[0], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    second = tokenizer("done", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    mask = out.batch["response_mask"][0].tolist()
    responses = out.batch["responses"][0].tolist()
    model_ids = [t for t, m in zip(responses, mask) if m]
    assert model_ids == first + second  # the model's own ids, in order, never re-tokenized
    n = int(out.batch["attention_mask"][0, out.batch["prompts"].shape[1] :].sum())
    assert mask[: len(first)] == [1] * len(first) and mask[n - len(second) : n] == [1] * len(second)
    assert set(mask[len(first) : n - len(second)]) == {0}
    assert mask[n:] == [0] * (len(mask) - n)
    # the second turn's prompt is exactly the trajectory before it: prompt, model turn, tool turn
    prompt_width = out.batch["prompts"].shape[1]
    row_prompt = out.batch["prompts"][0][out.batch["attention_mask"][0, :prompt_width].bool()].tolist()
    assert policy.prompts[-1] == row_prompt + responses[: n - len(second)]
    logprobs = out.batch["rollout_log_probs"][0].tolist()
    assert all(lp == -1.0 for lp, m in zip(logprobs, mask) if m) and all(
        lp == 0.0 for lp, m in zip(logprobs, mask) if not m
    )


def test_calls_beyond_max_parallel_calls_are_answered_not_run(tokenizer):
    echo = SmallTool("echo")
    out, _ = run(tokenizer, [call("echo", i=1) + call("echo", i=2) + call("echo", i=3), "ok"], [echo], rows=1)
    assert len(echo.calls) == 1
    assert "the call to 'echo' was not run: at most 1 tool calls per turn" in observation_text(tokenizer, out)
    assert agent_loop_metrics(out.non_tensor_batch)["agent_loop/tool_errors/over_limit"] == 2


@pytest.mark.parametrize(
    "side,kept", [("left", "aaaa...(truncated)"), ("right", "(truncated)...bbbb"), ("middle", "aa...(truncated)...bb")]
)
def test_long_tool_answers_are_cut_on_the_configured_side(tokenizer, side, kept):
    class Long(SmallTool):
        async def answer(self, parameters):
            return ToolResponse(text="a" * 50 + "b" * 50), 0.0, {}

    overrides = [
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=4",
        f"actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side={side}",
    ]
    out, _ = run(tokenizer, [call("long"), "ok"], [Long("long")], *overrides, rows=1)
    assert f"tool\n{kept}<|im_end|>" in observation_text(tokenizer, out)
    assert agent_loop_metrics(out.non_tensor_batch)["agent_loop/tool_response_truncated"] == 1


def test_the_response_budget_ends_a_trajectory_without_the_observation_that_does_not_fit(tokenizer):
    class Verbose(SmallTool):
        async def answer(self, parameters):
            return ToolResponse(text="x" * 200), 0.0, {}

    overrides = ["actor_rollout_ref.rollout.response_length=120", "data.max_response_length=120"]
    out, _ = run(tokenizer, [call("verbose"), "ok"], [Verbose("verbose")], *overrides, rows=1)
    assert out.batch["responses"].shape[1] == 120
    assert out.non_tensor_batch["finish_reason"].tolist() == ["length"]
    assert (
        int(out.batch["attention_mask"][0, out.batch["prompts"].shape[1] :].sum())
        == len(tokenizer(call("verbose"), add_special_tokens=False)["input_ids"]) + 1
    )  # only the model's turn: the 200-character answer did not fit


def test_a_model_turn_cut_by_the_budget_ends_the_trajectory(tokenizer):
    overrides = ["actor_rollout_ref.rollout.response_length=10", "data.max_response_length=10"]
    out, _ = run(tokenizer, [call("echo", long_argument="y" * 40)], [SmallTool("echo")], *overrides, rows=1)
    assert out.batch["response_mask"][0].tolist() == [1] * 10
    assert out.non_tensor_batch["finish_reason"].tolist() == ["length"]


def test_turn_limits_end_a_trajectory(tokenizer):
    forever = [call("echo", n=1)]
    out, _ = run(tokenizer, forever, [SmallTool("echo")], "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3")
    assert out.non_tensor_batch["finish_reason"].tolist() == ["max_assistant_turns"] * 2
    assert out.non_tensor_batch["__num_turns__"].tolist() == [6, 6]  # prompt, 3 model turns, 2 tool turns
    out, _ = run(tokenizer, forever, [SmallTool("echo")], "actor_rollout_ref.rollout.multi_turn.max_user_turns=2")
    assert out.non_tensor_batch["finish_reason"].tolist() == ["max_user_turns"] * 2


def test_every_call_creates_its_instance_with_the_row_kwargs_and_releases_it(tokenizer):
    echo = SmallTool("echo")
    tools_kwargs = [{"echo": {"create_kwargs": {"table": {"a": i}}}} for i in range(2)]
    extra_info = [{"tools_kwargs": kw} for kw in tools_kwargs]
    out, _ = run(tokenizer, [call("echo", k="a"), call("echo", k="b"), "ok"], [echo], extra_info=extra_info)
    assert sorted(c["table"]["a"] for c in echo.created) == [0, 0, 1, 1]  # verl's lifecycle: per call
    assert len(echo.calls) == 4 and sorted(echo.released) == [f"echo-{i}" for i in range(1, 5)]
    assert out.non_tensor_batch["tool_rewards"].tolist() == [[0.25, 0.25], [0.25, 0.25]]


class Teacher:
    """A simulated user (verl's ``BaseInteraction`` interface): asks again once, then ends with score 1."""

    def __init__(self):
        self.started, self.finalized = [], []

    async def start_interaction(self, instance_id=None, **kwargs):
        self.started.append(kwargs)
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        if len(answers) < 2:
            return False, "Check your answer.", 0.0, {}
        return True, "Correct.", 1.0, {}

    async def calculate_score(self):
        return 0.0

    async def finalize_interaction(self, instance_id, **kwargs):
        self.finalized.append(instance_id)


def test_an_interaction_answers_as_the_user_with_its_turn_scores(tokenizer):
    teacher = Teacher()
    extra_info = [{"interaction_kwargs": {"name": "teacher", "ground_truth": "42"}}] * 2
    out, _ = run(tokenizer, ["#### 41", "#### 42"], [], interactions={"teacher": teacher}, extra_info=extra_info)
    assert "<|im_start|>user\nCheck your answer.<|im_end|>" in observation_text(tokenizer, out)
    assert "Correct." not in transcript(tokenizer, out)  # the closing answer ends the dialogue, unseen
    assert out.non_tensor_batch["turn_scores"].tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert out.non_tensor_batch["finish_reason"].tolist() == ["interaction_done"] * 2
    assert teacher.started[0] == {"name": "teacher", "ground_truth": "42"} and len(teacher.finalized) == 2


def test_a_row_naming_an_unknown_interaction_is_an_error_naming_the_row(tokenizer):
    extra_info = [{"interaction_kwargs": {"name": "nobody"}}]
    with pytest.raises(ValueError, match=r"row 0: extra_info.interaction_kwargs.name='nobody'"):
        run(tokenizer, ["x"], [], rows=1, interactions={"teacher": Teacher()}, extra_info=extra_info)


def test_rows_without_messages_are_an_error_naming_the_fix(tokenizer):
    TOOLS["current"], TOOLS["interactions"] = [], {}
    config = job_config("actor_rollout_ref.rollout.agent.default_agent_loop=test_scripted_tools_agent")
    manager = AgentLoopManager(config, server_handles=[ScriptedPolicy(tokenizer, ["x"])], tokenizer=tokenizer)
    batch = prompt_batch(tokenizer, 1)
    batch.non_tensor_batch.pop("raw_prompt")
    with pytest.raises(ValueError, match="no raw_prompt column: build the dataset with data.return_raw_chat=true"):
        manager.generate_sequences(batch)
