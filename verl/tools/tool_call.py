"""Run one tool call so that nothing a tool does can end the run: the agent loop's single entry to tools.

Every failure becomes an observation the model reads as the tool's answer (plain text starting with ``Error:``) and
a `ToolCallResult` whose ``error_kind`` the agent loop counts in its metrics:

===================  ==========================================================================================
``error_kind``       the model reads
===================  ==========================================================================================
``bad_arguments``    ``Error: bad arguments for calculator: missing required parameter 'expression' (string)``
``tool_error``       ``Error: <message>`` (the tool raised `ToolError`: the call made no sense, e.g. no such key)
``exception``        ``Error: calculator raised ZeroDivisionError: division by zero`` (clipped)
``timeout``          ``Error: calculator timed out after 5.0 s``
``bad_return``       ``Error: calculator returned NoneType, not a text answer``
``unknown_tool``     ``Error: there is no tool named 'calc'; the tools are: calculator, key_value_lookup``
===================  ==========================================================================================

The timeout is ``actor_rollout_ref.rollout.multi_turn.tool_timeout_s`` (verl has no such key; a hung tool there
hangs its trajectory). An async tool past it is cancelled; a sync `function_tool` runs in its own daemon thread, so
a hang holds that thread only (Python cannot stop it) and never the event loop the other trajectories run on.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verl.tools.base_tool import BaseTool, ToolError
from verl.tools.schemas import ToolResponse
from verl.tools.utils.argument_check import argument_problems, without_null_optionals

__all__ = ["ToolCallResult", "call_tool", "run_tool_call", "to_tool_response", "unknown_tool_result"]

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 300  # an error observation longer than this is clipped: a traceback-sized text floods the context
_RESPONSE_FIELDS = frozenset(ToolResponse.model_fields)


@dataclass
class ToolCallResult:
    """The outcome of one call. ``response`` is what the model reads (the error text when ``error`` is set);
    ``reward`` and ``metrics`` are the tool's (0 and empty on error); ``latency_s`` is wall time of the call."""

    response: ToolResponse
    reward: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    latency_s: float = 0.0


class _Failure(Exception):
    """A failed stage: the observation text and its kind."""

    def __init__(self, kind: str, text: str):
        super().__init__(text)
        self.kind, self.text = kind, _clip(text)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def to_tool_response(value: Any, tool_name: str) -> ToolResponse:
    """A tool's answer as a `ToolResponse`: a ToolResponse as is, a str as its text, a dict of ToolResponse fields
    (``{"text": ...}``) as that response, any other dict as its JSON text. Anything else is a bug in the tool and
    raises the failure `run_tool_call` reports as ``bad_return``."""
    if isinstance(value, ToolResponse):
        return value
    if isinstance(value, str):
        return ToolResponse(text=value)
    if isinstance(value, Mapping):
        if value and set(value) <= _RESPONSE_FIELDS:
            return ToolResponse.model_validate(dict(value))
        try:
            return ToolResponse(text=json.dumps(value, ensure_ascii=False))
        except (TypeError, ValueError):
            pass
    raise _Failure("bad_return", f"Error: {tool_name} returned {type(value).__name__}, not a text answer")


def _unpack_execute(out: Any, tool_name: str) -> tuple[ToolResponse, float, dict]:
    """verl's ``execute`` returns ``(response, step_reward, metrics)``."""
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        what = f"a {len(out)}-tuple" if isinstance(out, (tuple, list)) else type(out).__name__
        raise _Failure(
            "bad_return", f"Error: {tool_name} returned {what} from execute, not (response, reward, metrics)"
        )
    response, reward, metrics = out
    response = to_tool_response(response, tool_name)
    if not isinstance(reward, numbers.Real) or isinstance(reward, bool):
        raise _Failure("bad_return", f"Error: {tool_name} returned a {type(reward).__name__} reward, not a number")
    if metrics is not None and not isinstance(metrics, Mapping):
        raise _Failure("bad_return", f"Error: {tool_name} returned {type(metrics).__name__} metrics, not a dict")
    return response, float(reward), dict(metrics or {})


async def _guarded(tool_name: str, stage: Callable[[], Any], timeout_s: float | None) -> Any:
    """Run one lifecycle stage (``create``, ``execute``, ``release``) under the timeout, turning whatever goes wrong
    into a `_Failure`. A tool's own ``TimeoutError`` is an exception of the tool, not our timeout."""
    try:
        out = stage()
        if not inspect.isawaitable(out):  # a tool with a plain (sync) method: it has already run
            return out
        task = asyncio.ensure_future(out)
        done, _ = await asyncio.wait({task}, timeout=timeout_s if timeout_s and timeout_s > 0 else None)
        if not done:
            task.cancel()  # not awaited: a tool that swallows the cancellation must not hold us
            task.add_done_callback(_drop_result)
            raise _Failure("timeout", f"Error: {tool_name} timed out after {float(timeout_s)!r} s")
        if task.cancelled():  # cancelled from inside the tool, not by us: the trajectory goes on
            raise _Failure("exception", f"Error: {tool_name} was cancelled")
        return task.result()
    except _Failure:
        raise
    except ToolError as e:
        raise _Failure("tool_error", f"Error: {e}") from e
    except Exception as e:
        logger.debug("tool %s raised", tool_name, exc_info=True)
        raise _Failure("exception", f"Error: {tool_name} raised {type(e).__name__}: {e}") from e


def _drop_result(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log "exception was never retrieved"


def _decode_arguments(parameters: str | Mapping[str, Any], tool_name: str) -> dict[str, Any]:
    """The arguments as a dict: a parser's ``FunctionCall.arguments`` is JSON text."""
    if isinstance(parameters, Mapping):
        return dict(parameters)
    try:
        decoded = json.loads(parameters) if parameters.strip() else {}
    except json.JSONDecodeError as e:
        raise _Failure("bad_arguments", f"Error: arguments for {tool_name} are not valid JSON ({e.msg})") from e
    if not isinstance(decoded, dict):
        raise _Failure("bad_arguments", f"Error: arguments for {tool_name} must be a JSON object")
    return decoded


def _failed(failure: _Failure, start: float) -> ToolCallResult:
    return ToolCallResult(
        ToolResponse(text=failure.text),
        error=failure.text,
        error_kind=failure.kind,
        latency_s=time.perf_counter() - start,
    )


async def run_tool_call(
    tool: BaseTool,
    instance_id: str,
    parameters: str | Mapping[str, Any],
    timeout_s: float | None = 30.0,
    **kwargs: Any,
) -> ToolCallResult:
    """``tool.execute(instance_id, parameters, **kwargs)``, safely: the arguments (a dict, or JSON text as a parser
    gives them) are checked against the tool's schema first (an optional one given as null is left out), then the
    call runs under ``timeout_s`` (None or <= 0: no limit), and its return is checked. Never raises for anything the tool or the model did."""
    start = time.perf_counter()
    try:
        arguments = _decode_arguments(parameters, tool.name)
        schema = tool.tool_schema.function.parameters
        problems = argument_problems(schema, arguments)
        if problems:
            raise _Failure("bad_arguments", f"Error: bad arguments for {tool.name}: {'; '.join(problems)}")
        arguments = without_null_optionals(schema, arguments)
        out = await _guarded(tool.name, lambda: tool.execute(instance_id, arguments, **kwargs), timeout_s)
        response, reward, metrics = _unpack_execute(out, tool.name)
    except _Failure as failure:
        return _failed(failure, start)
    return ToolCallResult(response, reward, metrics, latency_s=time.perf_counter() - start)


async def call_tool(
    tool: BaseTool,
    parameters: str | Mapping[str, Any],
    tool_kwargs: Mapping[str, Any] | None = None,
    timeout_s: float | None = 30.0,
    **execute_kwargs: Any,
) -> ToolCallResult:
    """One call's whole lifecycle as verl's tool agent runs it: ``create(create_kwargs=...)``, `run_tool_call`,
    ``release``. ``tool_kwargs`` is the sample's ``extra_info.tools_kwargs[tool.name]``: its ``create_kwargs``
    go to ``create``, ``execute_kwargs`` to ``execute`` (with ``execute_kwargs`` given here), ``release_kwargs``
    to ``release``. Each stage has ``timeout_s``; ``latency_s`` covers all three. A failing ``release`` is logged,
    and reported only when the call itself succeeded."""
    start = time.perf_counter()
    tool_kwargs = tool_kwargs or {}
    create_kwargs = dict(tool_kwargs.get("create_kwargs") or {})
    try:
        created = await _guarded(tool.name, lambda: tool.create(create_kwargs=create_kwargs), timeout_s)
        instance_id = created[0] if isinstance(created, (tuple, list)) else created
    except _Failure as failure:
        return _failed(failure, start)
    kwargs = {**(tool_kwargs.get("execute_kwargs") or {}), **execute_kwargs}
    result = await run_tool_call(tool, instance_id, parameters, timeout_s, **kwargs)
    release_kwargs = dict(tool_kwargs.get("release_kwargs") or {})
    try:
        await _guarded(tool.name, lambda: tool.release(instance_id, **release_kwargs), timeout_s)
    except _Failure as failure:
        logger.warning("releasing tool %s failed: %s", tool.name, failure.text)
        if result.error is None:
            result = _failed(failure, start)
    result.latency_s = time.perf_counter() - start
    return result


def unknown_tool_result(name: str, tool_names: list[str] | Mapping[str, Any]) -> ToolCallResult:
    """The answer to a call of a tool that does not exist, listing the ones that do."""
    known = ", ".join(sorted(tool_names)) or "none"
    text = _clip(f"Error: there is no tool named '{name}'; the tools are: {known}")
    return ToolCallResult(ToolResponse(text=text), error=text, error_kind="unknown_tool")
