"""A response's text -> the assistant message's content and OpenAI tool_calls (the agent loop's hermes parser)."""

from __future__ import annotations

import json

from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.experimental.openai_server.tool_calls import parse_reply
from verl.models.tiny import build_tokenizer

PARSER = ToolParser.get_tool_parser("hermes", build_tokenizer())
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call>'


def test_calls_become_openai_tool_calls_and_the_rest_is_content():
    reply = parse_reply(PARSER, f"Let me compute.\n{CALL}\n{CALL}")
    assert reply.content == "Let me compute."
    assert len(reply.tool_calls) == 2 and reply.tool_calls[0]["id"] != reply.tool_calls[1]["id"]
    call = reply.tool_calls[0]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"expression": "4821*37"}


def test_a_call_alone_has_no_content_and_text_alone_no_calls():
    assert parse_reply(PARSER, CALL).content is None
    assert parse_reply(PARSER, "178377").content == "178377" and parse_reply(PARSER, "178377").tool_calls == []
    assert parse_reply(None, CALL).content == CALL  # no tools offered: nothing is parsed


def test_a_malformed_call_keeps_the_whole_text_as_content():
    text = f'{CALL}\n<tool_call>{{"name": "calculator", "arguments": </tool_call>'
    reply = parse_reply(PARSER, text)
    assert reply.content == text
    assert [c["function"]["name"] for c in reply.tool_calls] == ["calculator"]
    assert reply.errors and "not valid JSON" in reply.errors[0]
