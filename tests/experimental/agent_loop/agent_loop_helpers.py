"""Shared by the agent-loop tests: the actor's worker group on the shipped tiny model, prompt batches as the trainer
builds them, small tools, a parser that reads every model turn as a tool call, and a scripted policy.

The tiny model never writes ``<tool_call>`` blocks by itself. Tests that need tool turns between real model turns
read every turn as a call to ``echo`` (`EveryTurnCallsEcho`); tests of what the loop does with the model's calls use
`ScriptedPolicy`, a server whose turns are fixed texts (a stand-in for a model that writes exactly those calls).
"""

from __future__ import annotations

import asyncio
import json

import torch

from verl.experimental.agent_loop import FunctionCall, ParsedToolCalls, ToolParser, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.single_controller.base.worker_group import ClassWithInitArgs, LocalWorkerGroup
from verl.tools import BaseTool, ToolResponse
from verl.utils.config import load_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
from verl.workers.fsdp_workers import ActorRolloutRefWorker
from verl.workers.rollout import TokenOutput

QUESTIONS = "builtin://arithmetic/test?test_size=16"


def job_config(*overrides: str):
    return load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=async", *overrides])


def actor_group(config):
    """The actor's worker group (local backend), model built: the rollout server of the agent loop."""
    spec = ClassWithInitArgs(ActorRolloutRefWorker, (config.actor_rollout_ref,), {"role": "actor_rollout"})
    handle = LocalWorkerGroup({"actor_rollout": spec}).role("actor_rollout")
    handle.init_model()
    return handle


def prompt_batch(tokenizer, rows: int, start: int = 0, **columns):
    """``rows`` arithmetic prompts, left-padded, with their messages (``raw_prompt``) and ``sample_index``;
    ``columns``: extra non-tensor columns, one value per row."""
    ds = RLHFDataset(QUESTIONS, tokenizer, max_prompt_length=64, return_raw_chat=True)
    batch = collate_prompts([ds[i % len(ds)] for i in range(start, start + rows)], tokenizer.pad_token_id)
    batch.batch["sample_index"] = torch.arange(start, start + rows, dtype=torch.int64)
    for key, values in columns.items():
        batch.non_tensor_batch[key] = _objects(values)
    return batch


def _objects(values):
    import numpy as np

    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values)
    return arr


class SmallTool(BaseTool):
    """A tool built in code: answers with its name and the arguments (any arguments: the schema allows extra ones),
    step reward 0.25; records its lifecycle calls."""

    def __init__(self, name: str, parameters: dict | None = None):
        anything = {"type": "object", "properties": {}, "required": [], "additionalProperties": True}
        schema = {
            "type": "function",
            "function": {"name": name, "description": f"the {name} tool", "parameters": parameters or anything},
        }
        super().__init__({}, schema)
        self.created, self.released, self.calls = [], [], []

    async def create(self, instance_id=None, create_kwargs=None, **kwargs):
        self.created.append(create_kwargs)
        return f"{self.name}-{len(self.created)}", ToolResponse()

    async def execute(self, instance_id, parameters, **kwargs):
        self.calls.append(parameters)
        return await self.answer(parameters)

    async def answer(self, parameters):
        return ToolResponse(text=f"{self.name}: {json.dumps(parameters, sort_keys=True)}"), 0.25, {}

    async def release(self, instance_id, **kwargs):
        self.released.append(instance_id)


class RaisingTool(SmallTool):
    async def answer(self, parameters):
        raise RuntimeError("the service is down")


class JunkTool(SmallTool):
    async def answer(self, parameters):
        return {"not": "a tool response"}


class SleepyTool(SmallTool):
    async def answer(self, parameters):
        await asyncio.sleep(60)
        return ToolResponse(text="too late"), 0.0, {}


@ToolParser.register("test_every_turn_calls_echo")
class EveryTurnCallsEcho(ToolParser):
    """Reads any model turn as one call of ``echo`` with the turn's length: tool turns between real model turns."""

    def parse_text(self, text: str) -> ParsedToolCalls:
        return ParsedToolCalls(content=text, calls=[FunctionCall("echo", json.dumps({"chars": len(text)}))])


ECHO = SmallTool("echo")


@register("test_echo_agent")
class EchoAgentLoop(ToolAgentLoop):
    """``tool_agent`` with the ``echo`` tool built in code."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, tools=[ECHO], **kwargs)


class ScriptedPolicy:
    """A rollout server whose model turns are fixed texts: turn k of every trajectory is ``turns[k]`` (the last one
    repeats), tokenized, ending with the stop token, log-prob -1 per token."""

    def __init__(self, tokenizer, turns: list[str]):
        self.tokenizer, self.turns = tokenizer, turns
        self.prompts: list[list[int]] = []
        self.params: list[dict] = []  # each request's sampling_params

    async def generate(self, prompt_ids, sampling_params, request_id, image_data=None, video_data=None, priority=0):
        self.prompts.append(list(prompt_ids))
        self.params.append(dict(sampling_params))
        text = self.turns[min(self._turn_of(prompt_ids), len(self.turns) - 1)]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        ids = ids[: sampling_params.get("max_tokens", len(ids))]
        finish = "stop" if ids and ids[-1] == self.tokenizer.eos_token_id else "length"
        return TokenOutput(token_ids=ids, log_probs=[-1.0] * len(ids), stop_reason="completed", finish_reason=finish)

    def _turn_of(self, prompt_ids):
        """The turn number: assistant turns already in the context (generation prompts seen so far minus one)."""
        opener = self.tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        count, n = 0, len(opener)
        for i in range(len(prompt_ids) - n + 1):
            if prompt_ids[i : i + n] == opener:
                count += 1
        return count - 1
