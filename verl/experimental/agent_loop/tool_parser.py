"""Tool-call parsers: the model's response text -> the function calls it asked for (verl's ``ToolParser``).

One parser serves the agent loop (``ToolParser.get_tool_parser(rollout.multi_turn.format, tokenizer)``) and the
OpenAI-compatible server, so a call the server reports is the call the agent loop would run. verl's hermes parser
drops a malformed call with a log line, which is how tool calling "silently never happens"; here every malformed
block is kept as an error in `ParsedToolCalls.errors`, so the agent loop can answer it with an error observation and
count it (``extract_tool_calls`` keeps verl's two-value return for code written against it).

Formats (``@ToolParser.register(name)`` adds one):

- ``hermes`` (Qwen2.5, Hermes, most open models): ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  one block per call, any text around the blocks is the content.
"""

from __future__ import annotations

import asyncio
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["FunctionCall", "HermesToolParser", "ParsedToolCalls", "ToolParser"]


@dataclass
class FunctionCall:
    """One call the model asked for. ``arguments`` is a JSON object as text (OpenAI's and verl's convention):
    check it against the tool's schema before running the tool."""

    name: str
    arguments: str

    def model_dump(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass
class ParsedToolCalls:
    """The content (text outside the call blocks), the well-formed calls in order, and one message per malformed
    block (what was wrong and the block's text, cut to 200 characters)."""

    content: str
    calls: list[FunctionCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ToolParser(ABC):
    """Parses a response into `ParsedToolCalls`; ``parse_text`` does the work, the rest decodes token ids."""

    _registry: ClassVar[dict[str, type[ToolParser]]] = {}

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    @classmethod
    def register(cls, name: str):
        def decorator(subclass: type[ToolParser]) -> type[ToolParser]:
            cls._registry[name] = subclass
            return subclass

        return decorator

    @classmethod
    def get_tool_parser(cls, name: str, tokenizer: Any) -> ToolParser:
        if name not in cls._registry:
            raise ValueError(
                f"unknown tool-call format {name!r} (actor_rollout_ref.rollout.multi_turn.format): registered are "
                f"{sorted(cls._registry)}; add one with @ToolParser.register(name)"
            )
        return cls._registry[name](tokenizer)

    @abstractmethod
    def parse_text(self, text: str) -> ParsedToolCalls:
        """The calls in ``text``."""

    def parse_ids(self, response_ids: list[int]) -> ParsedToolCalls:
        return self.parse_text(self.tokenizer.decode(response_ids, skip_special_tokens=True))

    async def extract_tool_calls(self, responses_ids: list[int]) -> tuple[str, list[FunctionCall]]:
        """verl's call: (content, calls); decoding runs off the event loop. Malformed blocks are left out here: use
        `parse_ids` to see them."""
        parsed = await asyncio.get_running_loop().run_in_executor(None, self.parse_ids, responses_ids)
        return parsed.content, parsed.calls


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


@ToolParser.register("hermes")
class HermesToolParser(ToolParser):
    """``<tool_call>{"name": "f", "arguments": {...}}</tool_call>`` blocks. ``arguments`` may also be a JSON string
    holding an object (some models write it so); an opening tag without a closing one (the response hit its length
    limit) is an error, as is a block whose JSON is not an object with a string ``name`` and object ``arguments``."""

    start, end = "<tool_call>", "</tool_call>"
    _block = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

    def parse_text(self, text: str) -> ParsedToolCalls:
        calls, errors = [], []
        for body in self._block.findall(text):
            call = _hermes_call(body.strip())
            if isinstance(call, str):
                errors.append(f"{call}: {_clip(body.strip())}")
            else:
                calls.append(call)
        content = self._block.sub("", text)
        if self.start in content:  # an unclosed block: everything after the tag was meant as a call
            head, _, tail = content.partition(self.start)
            errors.append(f"<tool_call> without </tool_call>: {_clip(tail.strip())}")
            content = head
        return ParsedToolCalls(content=content.strip(), calls=calls, errors=errors)


def _hermes_call(body: str) -> FunctionCall | str:
    """The call in one block's body, or what is wrong with it."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return f"tool call is not valid JSON ({e.msg} at character {e.pos})"
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return 'tool call needs {"name": "<function>", "arguments": {...}}'
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return f"arguments of {obj['name']!r} are a string that is not a JSON object"
    if not isinstance(args, dict):
        return f"arguments of {obj['name']!r} must be a JSON object, got {type(args).__name__}"
    return FunctionCall(name=obj["name"], arguments=json.dumps(args, ensure_ascii=False))
