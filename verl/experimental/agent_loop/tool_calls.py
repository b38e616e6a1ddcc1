"""The tool calls of one model turn: every call the model wrote gets an observation it reads, and no tool can stop
the batch.

Each well-formed call of a configured tool runs verl's lifecycle through ``verl.tools.call_tool`` -- ``create``
(with the row's ``tools_kwargs[name]["create_kwargs"]``), ``execute`` (the arguments checked against the tool's
schema first), ``release`` -- under ``multi_turn.tool_timeout_s`` per stage; the calls of one turn run concurrently
and their observations keep the calls' order. What goes wrong is an ``Error: ...`` observation of one kind
(`ERROR_KINDS`), counted in the step metrics:

- the agent loop's: ``malformed`` (a ``<tool_call>`` block that does not parse: the parser's message),
  ``over_limit`` (calls beyond ``multi_turn.max_parallel_calls`` in one turn: not run);
- the tools' (docs/tools.md): ``unknown_tool``, ``bad_arguments``, ``tool_error``, ``exception``, ``timeout``,
  ``bad_return``.

A successful answer longer than ``multi_turn.max_tool_response_length`` characters is cut on
``tool_response_truncate_side`` with verl's marks (``left`` keeps the start, ``right`` the end, ``middle`` both
ends). Observations are text: images or videos a tool returns are not passed to the (text-only) model.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from verl.experimental.agent_loop.tool_parser import FunctionCall, ParsedToolCalls
from verl.tools.tool_call import call_tool, unknown_tool_result

__all__ = ["ERROR_KINDS", "Observation", "ToolSession", "truncate_tool_response"]

ERROR_KINDS = (
    "malformed",
    "over_limit",
    "unknown_tool",
    "bad_arguments",
    "tool_error",
    "exception",
    "timeout",
    "bad_return",
)
TRUNCATE_SIDES = ("left", "middle", "right")
NOT_RUN = ("malformed", "over_limit", "unknown_tool", "bad_arguments")  # kinds where no tool code ran


@dataclass
class Observation:
    """What one call gives back: the text the model reads, the tool's step reward and metrics, the error kind (None
    when the tool answered), the call's seconds, and whether the text was cut."""

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


class ToolSession:
    """Runs one trajectory's tool calls (see the module docstring).

    Args:
        tools: tool name -> tool (verl ``BaseTool``s).
        tools_kwargs: the row's ``extra_info.tools_kwargs``: name -> ``{"create_kwargs": ..., "execute_kwargs": ...}``.
        max_response_length, truncate_side: the observation length limit (characters) and where to cut.
        timeout_s: seconds each stage of a call may run (``multi_turn.tool_timeout_s``).
    """

    def __init__(
        self,
        tools: dict[str, Any],
        tools_kwargs: dict[str, Any],
        max_response_length: int,
        truncate_side: str,
        timeout_s: float | None,
    ):
        self.tools = tools
        self.tools_kwargs = tools_kwargs if isinstance(tools_kwargs, dict) else {}
        self.max_response_length, self.truncate_side = int(max_response_length), truncate_side
        self.timeout_s = timeout_s

    async def run_turn(self, parsed: ParsedToolCalls, max_parallel_calls: int) -> list[Observation]:
        """The observations of one model turn's calls (malformed blocks after the calls)."""
        limit = max(1, int(max_parallel_calls))
        observations = list(await asyncio.gather(*(self._call(c) for c in parsed.calls[:limit])))
        for call in parsed.calls[limit:]:
            text = f"Error: the call to {call.name!r} was not run: at most {limit} tool calls per turn"
            observations.append(Observation(call.name, text, error="over_limit"))
        for message in parsed.errors:
            observations.append(Observation("", f"Error: malformed tool call: {message}", error="malformed"))
        return observations

    async def _call(self, call: FunctionCall) -> Observation:
        tool = self.tools.get(call.name)
        if tool is None:
            result = unknown_tool_result(call.name, self.tools)
        else:
            result = await call_tool(tool, call.arguments, self.tools_kwargs.get(call.name), timeout_s=self.timeout_s)
        text = result.response.text or ""
        if result.error_kind is not None:
            return Observation(call.name, text, error=result.error_kind, seconds=result.latency_s)
        text, cut = truncate_tool_response(text, self.max_response_length, self.truncate_side)
        return Observation(call.name, text, result.reward, result.metrics, seconds=result.latency_s, truncated=cut)
