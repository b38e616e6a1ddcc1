"""Running the tool calls of one trajectory: every call gets an observation the model sees, and no tool can stop the
batch.

A trajectory's tools follow verl's ``BaseTool`` lifecycle: ``create`` (with the row's
``tools_kwargs[name]["create_kwargs"]``) the first time the trajectory calls the tool, ``execute`` once per call
(with ``tools_kwargs[name]["execute_kwargs"]``), and at the end ``calc_reward`` then ``release``. Each of these runs
under the tool's time limit (``config.timeout`` in the tool YAML, seconds; else `DEFAULT_TOOL_TIMEOUT_S`).

What goes wrong becomes an observation, counted by kind (`ERROR_KINDS`):

- ``malformed``: a ``<tool_call>`` block that does not parse (the parser's message);
- ``unknown_tool``: a name no configured tool has (the observation lists the tools);
- ``over_limit``: calls beyond ``multi_turn.max_parallel_calls`` in one turn (not run);
- ``exception``: ``create``/``execute`` raised (type and message);
- ``timeout``: ``create``/``execute`` did not finish within the time limit;
- ``bad_return``: ``execute`` returned something other than ``(ToolResponse, reward, metrics)`` or a reward that is
  not a finite number.

An observation longer than ``multi_turn.max_tool_response_length`` characters is cut on
``tool_response_truncate_side`` (verl's marks: ``left`` keeps the start, ``right`` the end, ``middle`` both ends).
Calls of one turn run concurrently; their observations keep the calls' order, malformed blocks after them.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from verl.experimental.agent_loop.tool_parser import FunctionCall, ParsedToolCalls

__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "ERROR_KINDS", "ToolCallResult", "ToolSession", "truncate_tool_response"]

DEFAULT_TOOL_TIMEOUT_S = 30.0  # verl's tools' default ``timeout``
ERROR_KINDS = ("malformed", "unknown_tool", "over_limit", "exception", "timeout", "bad_return")
TRUNCATE_SIDES = ("left", "middle", "right")


@dataclass
class ToolCallResult:
    """One call's outcome: the observation text, its step reward, the tool's metrics, the error kind (None when it
    ran) and the seconds the call took."""

    name: str
    text: str
    reward: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0
    truncated: bool = False


def truncate_tool_response(text: str, limit: int, side: str) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters on ``side`` (verl's marks), and whether it was cut."""
    if side not in TRUNCATE_SIDES:
        raise ValueError(
            f"actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side={side!r}: use left, middle or right"
        )
    if limit <= 0 or len(text) <= limit:
        return text, False
    if side == "left":
        return text[:limit] + "...(truncated)", True
    if side == "right":
        return "(truncated)..." + text[-limit:], True
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[len(text) - half :], True


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def tool_timeout(tool: Any) -> float:
    """A tool's time limit per call: its ``config["timeout"]`` (seconds) or `DEFAULT_TOOL_TIMEOUT_S`."""
    config = getattr(tool, "config", None)
    value = config.get("timeout") if hasattr(config, "get") else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_TOOL_TIMEOUT_S


class ToolSession:
    """The tool instances of one trajectory (see the module docstring).

    Args:
        tools: tool name -> tool (verl ``BaseTool``s).
        tools_kwargs: the row's ``extra_info.tools_kwargs``: name -> ``{"create_kwargs": ..., "execute_kwargs": ...}``.
        max_response_length, truncate_side: the observation length limit (characters) and where to cut.
    """

    def __init__(
        self, tools: dict[str, Any], tools_kwargs: dict[str, Any], max_response_length: int, truncate_side: str
    ):
        self.tools = tools
        self.tools_kwargs = tools_kwargs if isinstance(tools_kwargs, dict) else {}
        self.max_response_length = int(max_response_length)
        self.truncate_side = truncate_side
        self._instances: dict[str, asyncio.Task] = {}  # tool name -> the task creating its instance

    async def run_turn(self, parsed: ParsedToolCalls, max_parallel_calls: int) -> list[ToolCallResult]:
        """The observations of one assistant turn's calls (malformed blocks included)."""
        limit = max(1, int(max_parallel_calls))
        runs = [self._call(c) for c in parsed.calls[:limit]]
        results = list(await asyncio.gather(*runs))
        for call in parsed.calls[limit:]:
            text = f"Error: the call to {call.name!r} was not run: at most {limit} tool calls per turn"
            results.append(ToolCallResult(call.name, text, error="over_limit"))
        for message in parsed.errors:
            results.append(ToolCallResult("", f"Error: malformed tool call: {message}", error="malformed"))
        return results

    async def close(self) -> dict[str, float]:
        """``calc_reward`` then ``release`` of every tool instance created; returns each tool's reward (a tool whose
        ``calc_reward`` fails or times out is left out)."""
        rewards: dict[str, float] = {}
        for name, creating in self._instances.items():
            tool = self.tools[name]
            try:
                instance_id = await asyncio.wait_for(asyncio.shield(creating), tool_timeout(tool))
            except Exception:  # creation failed or hangs: nothing to score or release (its calls said so)
                creating.cancel()
                continue
            reward = await _guarded(tool.calc_reward(instance_id), tool_timeout(tool))
            if isinstance(reward, int | float) and not isinstance(reward, bool) and math.isfinite(reward):
                rewards[name] = float(reward)
            await _guarded(tool.release(instance_id), tool_timeout(tool))
        self._instances.clear()
        return rewards

    async def _call(self, call: FunctionCall) -> ToolCallResult:
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolCallResult(
                call.name, f"Error: no tool named {call.name!r} (tools: {known})", error="unknown_tool"
            )
        kwargs = self.tools_kwargs.get(call.name) or {}
        timeout, start = tool_timeout(tool), time.perf_counter()
        try:
            instance_id = await asyncio.wait_for(self._instance(call.name, tool, kwargs), timeout)
            returned = await asyncio.wait_for(
                tool.execute(instance_id, json.loads(call.arguments), **dict(kwargs.get("execute_kwargs") or {})),
                timeout,
            )
        except (TimeoutError, asyncio.TimeoutError):
            text = f"Error: tool {call.name!r} did not answer within {timeout:g} s"
            return ToolCallResult(call.name, text, error="timeout", seconds=time.perf_counter() - start)
        except Exception as e:  # any failure of a user's tool is the model's observation, never the run's end
            text = f"Error: tool {call.name!r} raised {type(e).__name__}: {_clip(str(e))}"
            return ToolCallResult(call.name, text, error="exception", seconds=time.perf_counter() - start)
        seconds = time.perf_counter() - start
        text, reward, metrics, problem = _unpack(returned)
        if problem is not None:
            text = f"Error: tool {call.name!r} {problem}"
            return ToolCallResult(call.name, text, error="bad_return", seconds=seconds)
        text, cut = truncate_tool_response(text, self.max_response_length, self.truncate_side)
        return ToolCallResult(call.name, text, reward, metrics, seconds=seconds, truncated=cut)

    async def _instance(self, name: str, tool: Any, kwargs: dict[str, Any]) -> str:
        """The trajectory's instance of ``name``, created on first use (concurrent calls share the creation)."""
        if name not in self._instances:
            create_kwargs = dict(kwargs.get("create_kwargs") or {})
            self._instances[name] = asyncio.ensure_future(_created_id(tool.create(create_kwargs=create_kwargs)))
        return await asyncio.shield(self._instances[name])


async def _created_id(creating: Awaitable) -> str:
    created = await creating
    return created[0] if isinstance(created, tuple) else created  # verl: (instance_id, ToolResponse)


async def _guarded(awaitable: Awaitable, timeout: float) -> Any:
    """``awaitable``'s result, or None when it raises or times out (end-of-trajectory calls must not stop the batch)."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except Exception:
        return None


def _unpack(returned: Any) -> tuple[str, float, dict, str | None]:
    """``(text, reward, metrics, problem)`` of what ``execute`` returned; ``problem`` says what is wrong with it."""
    if not (isinstance(returned, tuple) and len(returned) == 3):
        return "", 0.0, {}, f"returned {_clip(repr(returned), 80)} instead of (ToolResponse, reward, metrics)"
    response, reward, metrics = returned
    text = response if isinstance(response, str) else getattr(response, "text", _MISSING)
    if text is _MISSING:
        return "", 0.0, {}, f"returned {type(response).__name__} where a ToolResponse belongs"
    if text is not None and not isinstance(text, str):
        return "", 0.0, {}, f"returned a ToolResponse whose text is {type(text).__name__}, not str"
    if reward is None:
        reward = 0.0
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        return "", 0.0, {}, f"returned the reward {_clip(repr(reward), 40)}, not a finite number"
    return text or "", float(reward), dict(metrics) if isinstance(metrics, dict) else {}, None


_MISSING = object()
