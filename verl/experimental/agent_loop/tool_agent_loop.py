"""``tool_agent``: the model calls tools (and answers a simulated user) over several turns, token in, token out.

One trajectory:

1. the prompt: the row's messages (``raw_prompt``) and the tools' schemas through the chat template;
2. a model turn: the server samples up to the remaining response budget; its ids and log-probs are appended with
   ``response_mask`` 1;
3. the turn is parsed with ``ToolParser(multi_turn.format)``: calls run (`ToolSession`) and their observations go
   back as ``tool`` messages; with no call, an interaction (``multi_turn.interaction_config_path``, chosen by the
   row's ``extra_info.interaction_kwargs.name``) may answer as the user; else the trajectory is done;
4. the new messages' ids (`ChatTurns.delta_ids`) are appended with ``response_mask`` 0, and back to 2.

It ends (``extra_fields["finish_reason"]``) with ``stop`` (a turn without calls and no user to answer),
``length`` (the response budget ``rollout.response_length`` is used up: a cut model turn, or an observation that
does not fit, which is then left out), ``max_assistant_turns`` / ``max_user_turns`` (``multi_turn``'s limits; tool
turns count as user turns, as in verl), ``interaction_done`` (the simulated user ended it), ``interaction_error``
(it raised), or ``prompt_length`` (the rendered prompt is longer than ``rollout.prompt_length``: nothing sampled).

Rewards: each answered call's step reward goes to ``extra_fields["tool_rewards"]``, the interaction's turn scores to
``["turn_scores"]`` (verl's keys); the reward function receives them in ``extra_info`` (with ``num_turns``) and
scores the decoded transcript. Tools follow verl's per-call lifecycle (`tool_calls`), so no tool state outlives a
call and ``calc_reward`` is not called (as in verl's tool agent).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.base import AgentLoopBase, AgentLoopOutput, register
from verl.experimental.agent_loop.chat_turns import ChatTurns
from verl.experimental.agent_loop.environment import load_interactions, load_tools, tool_schemas
from verl.experimental.agent_loop.tokenization_check import check_tokenization
from verl.experimental.agent_loop.tool_calls import ERROR_KINDS, NOT_RUN, Observation, ToolSession
from verl.experimental.agent_loop.tool_parser import ToolParser

logger = logging.getLogger(__name__)

__all__ = ["ToolAgentLoop"]


@dataclass
class _Trajectory:
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    assistant_turns: int = 0
    user_turns: int = 0
    last_model_turn: tuple[list[int], bool] | None = None  # (ids, stopped) while the model's turn is the last
    finish_reason: str = "stop"
    observations: list[Observation] = field(default_factory=list)
    tool_s: float = 0.0
    turn_scores: list[float] = field(default_factory=list)

    def add_model_turn(self, ids: list[int], logprobs: list[float] | None, stopped: bool) -> None:
        self.response_ids += ids
        self.response_mask += [1] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.assistant_turns += 1
        self.last_model_turn = (ids, stopped)

    def add_other_turn(self, ids: list[int]) -> None:
        self.response_ids += ids
        self.response_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.user_turns += 1
        self.last_model_turn = None


@register("tool_agent")
class ToolAgentLoop(AgentLoopBase):
    """See the module docstring. ``tools`` (a list or name -> tool) and ``interactions`` (name -> interaction)
    replace the configured files' (for tests and programs that build their tools in code)."""

    def __init__(self, *args: Any, tools: Any = None, interactions: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        rollout = self.config.actor_rollout_ref.rollout
        mt = rollout.multi_turn
        self.prompt_length, self.response_length = int(rollout.prompt_length), int(rollout.response_length)
        self.max_assistant_turns, self.max_user_turns = mt.max_assistant_turns, mt.max_user_turns
        self.max_parallel_calls = int(mt.max_parallel_calls)
        self.max_tool_response_length = int(mt.max_tool_response_length)
        self.truncate_side = mt.tool_response_truncate_side
        self.tool_timeout_s = mt.tool_timeout_s
        self.sanity_check_mode = mt.tokenization_sanity_check_mode
        if tools is None:
            tools = load_tools(mt.tool_config_path, mt.function_tool_path)
        self.tools = tools if isinstance(tools, dict) else {t.name: t for t in tools}
        self.tool_schemas = tool_schemas(self.tools)
        self.interactions = interactions if interactions is not None else load_interactions(mt.interaction_config_path)
        self.tool_parser = ToolParser.get_tool_parser(mt.format, self.tokenizer)
        self.turns = ChatTurns.of(self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        where = f"row {kwargs.get('index', '?')}"
        if kwargs.get("raw_prompt") is None:
            raise ValueError(
                f"{where}: tool_agent renders the row's chat messages, but the batch has no raw_prompt column: build "
                "the dataset with data.return_raw_chat=true (main_ppo does when the agent loop runs)"
            )
        messages = [dict(m) for m in kwargs["raw_prompt"]]
        extra_info = kwargs.get("extra_info") or {}
        tools_kwargs = kwargs.get("tools_kwargs") or extra_info.get("tools_kwargs") or {}
        request_id = uuid4().hex
        traj = _Trajectory(prompt_ids=self.turns.prompt_ids(messages, self.tool_schemas))
        session = ToolSession(
            self.tools, tools_kwargs, self.max_tool_response_length, self.truncate_side, self.tool_timeout_s
        )
        interaction, interaction_kwargs = await self._start_interaction(request_id, extra_info, kwargs, where)
        try:
            if len(traj.prompt_ids) > self.prompt_length:
                logger.warning(
                    "%s: the rendered prompt has %d tokens, more than rollout.prompt_length=%d: nothing is sampled "
                    "(raise data.max_prompt_length, or shorten the prompt or the tool schemas)",
                    where,
                    len(traj.prompt_ids),
                    self.prompt_length,
                )
                traj.finish_reason = "prompt_length"
            else:
                await self._converse(
                    traj, messages, session, sampling_params, request_id, interaction, interaction_kwargs
                )
        finally:
            if interaction is not None:
                await _finalize(interaction, request_id)
        mismatch = check_tokenization(
            self.sanity_check_mode,
            self.turns,
            messages,
            self.tool_schemas,
            traj.prompt_ids + traj.response_ids,
            traj.last_model_turn,
            where,
        )
        return self._output(traj, bool(mismatch))

    async def _converse(self, traj, messages, session, sampling_params, request_id, interaction, interaction_kwargs):
        """Model turn, then tool or user turn, until one ends the trajectory (``traj.finish_reason``)."""
        while True:
            ids, stopped = await self._model_turn(traj, messages, sampling_params, request_id)
            finish = self._limit_reached(traj, stopped)
            if finish is None:
                reply = await self._reply(traj, ids, messages, session, request_id, interaction, interaction_kwargs)
                finish = reply if isinstance(reply, str) else None
            if finish is not None:
                traj.finish_reason = finish
                return
            delta = self.turns.delta_ids(reply, self.turns.bridge_after(ids, stopped))
            if len(traj.response_ids) + len(delta) >= self.response_length:
                traj.finish_reason = "length"  # no room for the observation and a model turn after it
                return
            traj.add_other_turn(delta)
            messages.extend(reply)

    async def _model_turn(self, traj, messages, sampling_params, request_id) -> tuple[list[int], bool]:
        """One model turn within the remaining budget, appended; its ids and whether it ended at a stop token."""
        remaining = self.response_length - len(traj.response_ids)
        params = {**sampling_params, "max_tokens": remaining}
        out = await self.server_manager.generate(
            request_id, prompt_ids=traj.prompt_ids + traj.response_ids, sampling_params=params
        )
        ids = list(out.token_ids)[:remaining]
        logprobs = None if out.log_probs is None else list(out.log_probs)[: len(ids)]
        stopped = out.finish_reason == "stop" if out.finish_reason else len(ids) < remaining
        traj.add_model_turn(ids, logprobs, stopped)
        messages.append({"role": "assistant", "content": self.turns.assistant_content(ids)})
        return ids, stopped

    def _limit_reached(self, traj: _Trajectory, stopped: bool) -> str | None:
        if not stopped:
            return "length"
        if self.max_assistant_turns and traj.assistant_turns >= self.max_assistant_turns:
            return "max_assistant_turns"
        if self.max_user_turns and traj.user_turns >= self.max_user_turns:
            return "max_user_turns"
        return None

    async def _reply(self, traj, ids, messages, session, request_id, interaction, interaction_kwargs):
        """The messages answering the model's turn (tool results, or the simulated user's), or the finish reason
        when nothing answers it."""
        parsed = self.tool_parser.parse_ids(ids)
        if parsed.calls or parsed.errors:
            start = time.perf_counter()
            results = await session.run_turn(parsed, self.max_parallel_calls)
            traj.tool_s += time.perf_counter() - start
            traj.observations += results
            return [{"role": "tool", "content": r.text} for r in results]
        if interaction is None:
            return "stop"
        try:
            done, text, score, _ = await interaction.generate_response(request_id, messages, **interaction_kwargs)
        except Exception as e:  # a user's interaction fails this trajectory's dialogue, not the batch
            logger.warning("interaction %r raised %s: %s; the trajectory ends", interaction, type(e).__name__, e)
            return "interaction_error"
        if score is not None:
            traj.turn_scores.append(float(score))
        return "interaction_done" if done else [{"role": "user", "content": str(text)}]

    async def _start_interaction(self, request_id: str, extra_info: dict, kwargs: dict, where: str):
        """The row's interaction and its kwargs (``extra_info.interaction_kwargs``), started; (None, {}) when the
        run has no interactions or the row names none."""
        ikwargs = kwargs.get("interaction_kwargs") or extra_info.get("interaction_kwargs") or {}
        if not self.interactions or not ikwargs:
            return None, {}
        name = ikwargs.get("name")
        if name is None and len(self.interactions) == 1:
            name = next(iter(self.interactions))
        if name not in self.interactions:
            raise ValueError(
                f"{where}: extra_info.interaction_kwargs.name={name!r} is not an interaction of "
                f"multi_turn.interaction_config_path (interactions: {sorted(self.interactions)})"
            )
        interaction = self.interactions[name]
        await interaction.start_interaction(request_id, **ikwargs)
        return interaction, ikwargs

    def _output(self, traj: _Trajectory, mismatch: bool) -> AgentLoopOutput:
        results = traj.observations
        errors = Counter(r.error for r in results if r.error is not None)
        ran = [r for r in results if r.error not in NOT_RUN]
        metrics: dict[str, Any] = {
            "tool_calls": traj.tool_s,
            "num_tool_calls": len(results),
            "tool_errors": sum(errors.values()),
            **{f"tool_errors/{kind}": errors.get(kind, 0) for kind in ERROR_KINDS},
            "tool_latency_max": max((r.seconds for r in ran), default=0.0),
            "tool_latency_sum": sum(r.seconds for r in ran),
            "tool_runs": len(ran),
            "tool_response_truncated": sum(r.truncated for r in results),
            "assistant_turns": traj.assistant_turns,
            "user_turns": traj.user_turns,
            "tokenization_mismatch": int(mismatch),
        }
        return AgentLoopOutput(
            prompt_ids=traj.prompt_ids,
            response_ids=traj.response_ids,
            response_mask=traj.response_mask,
            response_logprobs=traj.logprobs,
            num_turns=traj.user_turns + traj.assistant_turns + 1,
            metrics=metrics,
            extra_fields={
                "finish_reason": traj.finish_reason,
                "tool_rewards": [r.reward for r in results if r.error is None],
                "turn_scores": traj.turn_scores,
            },
        )


async def _finalize(interaction: Any, instance_id: str) -> None:
    """The interaction's ``finalize_interaction`` (with the instance id, or without: verl's base class takes none);
    a failure is logged, never raised."""
    try:
        try:
            await asyncio.wait_for(interaction.finalize_interaction(instance_id), 30.0)
        except TypeError:
            await asyncio.wait_for(interaction.finalize_interaction(), 30.0)
    except Exception as e:
        logger.warning("interaction %r: finalize_interaction raised %s: %s", interaction, type(e).__name__, e)
