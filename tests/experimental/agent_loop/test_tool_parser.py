"""Hermes tool-call parsing: well-formed calls come out in order with their arguments as a JSON object's text, and
every malformed block is reported (never silently dropped)."""

import asyncio
import json

import pytest

from verl.experimental.agent_loop import FunctionCall, ToolParser
from verl.utils.model import load_tokenizer

SHIPPED = "builtin://tiny-qwen2-arith-sft"


def _hermes():
    return ToolParser.get_tool_parser("hermes", tokenizer=None)


def test_calls_in_order_with_the_content_around_them():
    text = (
        'Let me compute.<tool_call>\n{"name": "calculator", "arguments": {"expression": "12*34"}}\n</tool_call>'
        ' and <tool_call>{"name": "lookup", "arguments": "{\\"key\\": \\"a\\"}"}</tool_call> done'
    )
    parsed = _hermes().parse_text(text)
    assert parsed.errors == []
    assert parsed.calls == [
        FunctionCall("calculator", json.dumps({"expression": "12*34"})),
        FunctionCall("lookup", json.dumps({"key": "a"})),  # arguments given as a JSON string: unwrapped
    ]
    assert parsed.content == "Let me compute. and  done"


def test_no_call_is_plain_content():
    parsed = _hermes().parse_text("The answer is 7.")
    assert parsed.calls == [] and parsed.errors == [] and parsed.content == "The answer is 7."


@pytest.mark.parametrize(
    "block, message",
    [
        ('{"name": "calculator", "arguments": {"expression": "1+1"}', "not valid JSON"),
        ('{"arguments": {}}', 'needs {"name"'),
        ('["calculator"]', 'needs {"name"'),
        ('{"name": "calculator", "arguments": [1, 2]}', "must be a JSON object, got list"),
        ('{"name": "calculator", "arguments": "not json"}', "string that is not a JSON object"),
    ],
)
def test_a_malformed_block_is_an_error_and_the_good_ones_still_run(block, message):
    good = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
    parsed = _hermes().parse_text(f"<tool_call>{block}</tool_call>{good}")
    assert [c.name for c in parsed.calls] == ["calculator"]
    assert len(parsed.errors) == 1 and message in parsed.errors[0]


def test_an_unclosed_block_is_an_error_not_content():
    parsed = _hermes().parse_text('Sure. <tool_call>{"name": "calculator", "argu')
    assert parsed.calls == [] and parsed.content == "Sure."
    assert parsed.errors == ['<tool_call> without </tool_call>: {"name": "calculator", "argu']


def test_unknown_format_names_the_key_and_the_registered_ones():
    with pytest.raises(ValueError, match=r"multi_turn.format.*'hermes'"):
        ToolParser.get_tool_parser("no-such-format", tokenizer=None)


def test_verls_async_call_decodes_token_ids():
    tokenizer = load_tokenizer(SHIPPED)
    ids = tokenizer.encode('x<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>')
    content, calls = asyncio.run(ToolParser.get_tool_parser("hermes", tokenizer).extract_tool_calls(ids))
    assert content == "x" and calls == [FunctionCall("f", '{"a": 1}')]
