"""The agent-loop registry: ``@register``, verl's ``agent_loop_config_path`` YAML, the ``agent_name`` column, and a
custom loop run by the manager."""

from __future__ import annotations

import random

import pytest
from agent_loop_helpers import ScriptedPolicy, job_config, prompt_batch

from verl.experimental.agent_loop import AgentLoopBase, AgentLoopManager, AgentLoopOutput, register
from verl.experimental.agent_loop.agent_loop import agent_loop_class, load_agent_loop_config, registered_agent_loops
from verl.utils.model import ASSETS_DIR, load_tokenizer


class Shouter(AgentLoopBase):
    """A custom loop: one model turn, its text also kept in extra_fields; ``volume`` comes from its YAML entry."""

    def __init__(self, *args, volume: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.volume = volume

    async def run(self, sampling_params, **kwargs):
        prompt = list(kwargs["raw_prompt_ids"])
        out = await self.server_manager.generate("x", prompt_ids=prompt, sampling_params=sampling_params)
        return AgentLoopOutput(
            prompt_ids=prompt,
            response_ids=out.token_ids,
            response_mask=[1] * len(out.token_ids),
            response_logprobs=out.log_probs,
            num_turns=2,
            extra_fields={"volume": self.volume},
        )


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(f"{ASSETS_DIR}/tiny-qwen2-arith-sft")


def test_the_built_in_loops_are_registered():
    assert {"single_turn_agent", "tool_agent"} <= set(registered_agent_loops())
    cls, extra = agent_loop_class("tool_agent")
    assert cls.__name__ == "ToolAgentLoop" and extra == {}


def test_an_unknown_agent_name_lists_the_registered_ones():
    with pytest.raises(KeyError, match=r"agent_name='nope' is not a registered agent loop \(registered: \["):
        agent_loop_class("nope")


def test_a_yaml_entry_registers_a_loop_with_its_constructor_arguments(tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(f"- name: shouter\n  _target_: {__name__}.Shouter\n  volume: 11\n")
    assert load_agent_loop_config(str(path)) == ["shouter"]
    cls, extra = agent_loop_class("shouter")
    assert cls is Shouter and extra == {"volume": 11}


@pytest.mark.parametrize(
    "text,message",
    [
        ("name: x\n", "expected a YAML list"),
        ("- name: x\n", "entry 0 needs a name and a _target_"),
    ],
)
def test_a_malformed_yaml_names_the_key_and_the_entry(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_agent_loop_config(str(path))


def test_a_target_that_is_no_agent_loop_is_an_error(tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text("- name: not_a_loop\n  _target_: collections.OrderedDict\n")
    load_agent_loop_config(str(path))
    with pytest.raises(TypeError, match="collections.OrderedDict is not an AgentLoopBase subclass"):
        agent_loop_class("not_a_loop")


def test_each_row_runs_the_loop_its_agent_name_column_names(tokenizer, tmp_path):
    path = tmp_path / "agents.yaml"
    path.write_text(f"- name: shouter\n  _target_: {__name__}.Shouter\n  volume: 3\n")
    config = job_config(f"actor_rollout_ref.rollout.agent.agent_loop_config_path={path}")
    policy = ScriptedPolicy(tokenizer, ["#### 1"])
    manager = AgentLoopManager(config, server_handles=[policy], tokenizer=tokenizer)
    random.seed(0)
    out = manager.generate_sequences(prompt_batch(tokenizer, 3, agent_name=["shouter", None, "single_turn_agent"]))
    assert out.non_tensor_batch["volume"].tolist() == [3, None, None]  # rows 1 and 2: the default single-turn loop
    assert out.non_tensor_batch["agent_name"].tolist() == ["shouter", None, "single_turn_agent"]
    seeds = [p["seed"] for p in policy.params]  # the server view seeds every turn, each row its own
    assert len(set(seeds)) == 3 and all(0 <= s < 2**63 for s in seeds)


@register("test_broken_agent")
class Broken(AgentLoopBase):
    async def run(self, sampling_params, **kwargs):
        return AgentLoopOutput(prompt_ids=[1], response_ids=[5, 6], response_mask=[1])


def test_a_malformed_trajectory_is_an_error_naming_the_loop_and_the_row(tokenizer):
    config = job_config("actor_rollout_ref.rollout.agent.default_agent_loop=test_broken_agent")
    manager = AgentLoopManager(config, server_handles=[ScriptedPolicy(tokenizer, ["x"])], tokenizer=tokenizer)
    with pytest.raises(
        ValueError, match=r"agent loop 'test_broken_agent' on row 0: 2 response_ids but 1 response_mask"
    ):
        manager.generate_sequences(prompt_batch(tokenizer, 2))


def test_the_loop_written_in_the_docs_runs(tokenizer):
    """docs/agent_loop.md, 'Writing a loop': its code, run as the manager runs a registered loop."""
    import os
    import re

    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "agent_loop.md")).read()
    code = re.search(r"## Writing a loop\n\n```python\n(.*?)```", docs, re.DOTALL).group(1)
    exec(compile(code, "docs/agent_loop.md", "exec"), {"__name__": "docs_agent_loop"})
    config = job_config(
        "actor_rollout_ref.rollout.agent.default_agent_loop=echo_twice",
        "actor_rollout_ref.rollout.response_length=128",
        "data.max_response_length=128",
    )
    manager = AgentLoopManager(config, server_handles=[ScriptedPolicy(tokenizer, ["#### 7"])], tokenizer=tokenizer)
    random.seed(0)
    out = manager.generate_sequences(prompt_batch(tokenizer, 2))
    mask = out.batch["response_mask"][0].tolist()
    assert mask[:7] == [1] * 7 and 0 in mask[7:] and out.non_tensor_batch["__num_turns__"].tolist() == [4, 4]
    assert tokenizer.decode(out.batch["responses"][0][mask.index(0) :]).startswith("<|im_start|>user\n#### 7")
