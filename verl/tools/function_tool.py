"""``@function_tool``: a plain Python function becomes a tool, its schema read from its signature and docstring.

    from verl.tools import function_tool

    @function_tool
    def word_count(text: str) -> int:
        '''Count the words in a text.

        Args:
            text: the text to count.
        '''
        return len(text.split())

``word_count`` is now a `FunctionTool` (a `BaseTool`; calling it still calls the function). Point
``actor_rollout_ref.rollout.multi_turn.function_tool_path`` at the file (a path or ``pkg://module``) and every
function tool defined there joins the tools of ``tool_config_path``, no YAML needed.

What the function returns becomes the model's observation: a str as is, a `ToolResponse` as is, a dict, list or
number as its JSON text; anything else (e.g. None) is reported as a bad return. An ``async def`` runs on the agent
loop's event loop; a plain ``def`` runs in its own daemon thread, so a slow or hung function never blocks the other
trajectories (``verl.tools.tool_call``). A ``**kwargs`` parameter receives the sample's ``create_kwargs`` and the
agent loop's execute keywords; the other parameters are the model's arguments.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.tools.tool_call import to_tool_response
from verl.tools.utils.daemon_thread import run_in_daemon_thread
from verl.tools.utils.signature_schema import function_schema
from verl.utils.import_utils import load_module

__all__ = ["FunctionTool", "function_tool", "load_function_tools"]


class FunctionTool(BaseTool):
    """A tool that calls ``fn`` with the model's arguments. Stateless apart from the per-instance
    ``create_kwargs`` a ``**kwargs`` function receives."""

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        config: dict | None = None,
    ):
        super().__init__({"type": "native", **(config or {})}, function_schema(fn, name, description))
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
        self._create_kwargs: dict[str, dict[str, Any]] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, {'async' if self.is_async else 'sync'})"

    async def create(
        self, instance_id: str | None = None, create_kwargs: dict[str, Any] | None = None, **kwargs: Any
    ) -> tuple[str, ToolResponse]:
        instance_id, response = await super().create(instance_id)
        if self.takes_kwargs:
            self._create_kwargs[instance_id] = {**kwargs, **(create_kwargs or {})}
        return instance_id, response

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        call_kwargs = dict(parameters)
        if self.takes_kwargs:  # the model's arguments win over a same-named sample kwarg
            call_kwargs = {**self._create_kwargs.get(instance_id, {}), **kwargs, **call_kwargs}
        if self.is_async:
            value = await self.fn(**call_kwargs)
        else:
            value = await run_in_daemon_thread(functools.partial(self.fn, **call_kwargs), name=f"tool-{self.name}")
        return _as_response(value, self.name), 0.0, {}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._create_kwargs.pop(instance_id, None)


def _as_response(value: Any, tool_name: str) -> ToolResponse:
    """A function's return as the observation: data (dict, list, number, bool) as JSON text."""
    if isinstance(value, (dict, list, tuple, int, float)):
        try:
            return ToolResponse(text=json.dumps(value, ensure_ascii=False))
        except (TypeError, ValueError):
            pass  # not JSON data: reported as a bad return
    return to_tool_response(value, tool_name)


def function_tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None
) -> Any:
    """Make ``fn`` a `FunctionTool`: ``@function_tool`` or ``@function_tool(name=..., description=...)`` (they
    replace the function's name and docstring summary in the schema)."""
    if fn is None:
        return lambda f: FunctionTool(f, name=name, description=description)
    return FunctionTool(fn, name=name, description=description)


def load_function_tools(path: str) -> list[FunctionTool]:
    """Every `FunctionTool` defined at the top level of the module at ``path`` (a ``.py`` file or
    ``pkg://package.module``), in definition order (``rollout.multi_turn.function_tool_path``)."""
    module = load_module(path)
    if module is None:
        return []
    tools, seen = [], set()
    for value in vars(module).values():
        if isinstance(value, FunctionTool) and id(value) not in seen:
            seen.add(id(value))
            tools.append(value)
    if not tools:
        raise ValueError(
            f"function_tool_path {path!r} defines no @function_tool functions: decorate each tool function with "
            f"@function_tool (from verl.tools import function_tool)"
        )
    return tools
