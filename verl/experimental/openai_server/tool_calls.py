"""A response's text -> OpenAI ``tool_calls``, with the hermes parser the agent loop uses (`agent_loop.tool_parser`).

A response with well-formed ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks becomes an assistant
message whose ``content`` is the text around them (None when there is none) and whose ``tool_calls`` carry the calls
(``arguments`` as JSON text, OpenAI's convention); the choice's ``finish_reason`` is then ``"tool_calls"``. A malformed
block is not dropped: when the parser reports one, ``content`` is the whole response text, so the caller sees what
the model wrote (the well-formed calls are still returned).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from verl.experimental.agent_loop.tool_parser import ToolParser

logger = logging.getLogger(__name__)

__all__ = ["AssistantReply", "parse_reply"]


@dataclass
class AssistantReply:
    """What a chat choice's message holds."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the parser's messages for malformed blocks


def parse_reply(parser: ToolParser | None, text: str) -> AssistantReply:
    """The message for response ``text``; ``parser`` None (no tools in the request, or ``tool_choice: "none"``):
    all of it is content."""
    if parser is None:
        return AssistantReply(content=text)
    parsed = parser.parse_text(text)
    calls = [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": call.model_dump()}
        for call in parsed.calls
    ]
    if parsed.errors:
        logger.warning("malformed tool call(s) in a response, returned as content: %s", "; ".join(parsed.errors))
        return AssistantReply(content=text, tool_calls=calls, errors=list(parsed.errors))
    return AssistantReply(content=parsed.content or (None if calls else ""), tool_calls=calls)
