"""OpenAI-format messages -> a chat template's input -> prompt ids, and the checks that catch a template that drops
what it is given."""

from __future__ import annotations

import pytest

from verl.experimental.chat_prompt import ChatFormatError, normalize_messages, normalize_tools, render_chat_prompt
from verl.models.tiny import build_tokenizer

TOOLS_TEMPLATE = (
    "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}</tool_call>"
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TOOL = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}


@pytest.fixture
def tokenizer():
    tok = build_tokenizer()
    tok.chat_template = TOOLS_TEMPLATE
    return tok


def test_messages_are_normalized_as_templates_expect():
    messages = normalize_messages(
        [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "4821"}, {"type": "text", "text": "*37?"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": '{"e": "4821*37"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "178377"},
        ]
    )
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["content"] == "4821*37?"
    assert messages[2]["content"] == ""
    assert messages[2]["tool_calls"] == [
        {"type": "function", "id": "call_1", "function": {"name": "calc", "arguments": {"e": "4821*37"}}}
    ]
    assert messages[3] == {"role": "tool", "content": "178377", "tool_call_id": "call_1"}


@pytest.mark.parametrize(
    "messages,param",
    [
        ([], "messages"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([{"role": "user"}], "messages[0].content"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "messages[0].content[0]"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}], None),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}], None),
        ([{"role": "assistant", "tool_calls": [{"function": {}}]}], "messages[0].tool_calls[0]"),
    ],
)
def test_a_malformed_message_names_its_field(messages, param):
    with pytest.raises(ChatFormatError) as e:
        normalize_messages(messages)
    if param is None:
        assert e.value.param == "messages[0].tool_calls[0].function.arguments"
    else:
        assert e.value.param == param


def test_tools_are_checked():
    assert normalize_tools(None) is None and normalize_tools([]) is None
    assert normalize_tools([TOOL]) == [TOOL]
    with pytest.raises(ChatFormatError, match=r"tools\[0\].function.name"):
        normalize_tools([{"type": "function", "function": {"name": ""}}])
    with pytest.raises(ChatFormatError, match=r"tools\[0\] must be"):
        normalize_tools([{"type": "retrieval"}])


def test_the_prompt_is_the_rendered_template_tokenized_without_extra_special_tokens(tokenizer):
    messages = normalize_messages([{"role": "user", "content": "hi"}])
    ids = render_chat_prompt(tokenizer, messages, [TOOL])
    assert tokenizer.decode(ids) == "<tools>calculator;</tools><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_continue_final_message_leaves_the_assistant_turn_open(tokenizer):
    messages = normalize_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<tool_call>"}])
    ids = render_chat_prompt(tokenizer, messages, add_generation_prompt=False, continue_final_message=True)
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n<tool_call>")
    with pytest.raises(ChatFormatError, match="continue_final_message"):
        render_chat_prompt(tokenizer, messages[:1], add_generation_prompt=False, continue_final_message=True)


def test_a_template_that_drops_tools_or_tool_results_is_an_error():
    plain = build_tokenizer()  # the tiny model's template renders role and content only
    with pytest.raises(ChatFormatError, match="does not render `tools`"):
        render_chat_prompt(plain, normalize_messages([{"role": "user", "content": "hi"}]), [TOOL])
    call = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "calc", "arguments": "{}"}}]}
    with pytest.raises(ChatFormatError, match="does not render an assistant's tool_calls"):
        render_chat_prompt(plain, normalize_messages([{"role": "user", "content": "hi"}, call]))
    no_tool_role = build_tokenizer()
    no_tool_role.chat_template = (
        "{% for m in messages %}{% if m.role != 'tool' %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}"
    )
    with pytest.raises(ChatFormatError, match=r"does not render tool messages \(messages\[1\]"):
        render_chat_prompt(
            no_tool_role, normalize_messages([{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}])
        )


def test_a_model_without_a_template_or_a_failing_template_is_an_error(tokenizer):
    tokenizer.chat_template = None
    with pytest.raises(ChatFormatError, match="no chat template"):
        render_chat_prompt(tokenizer, [{"role": "user", "content": "hi"}])
    tokenizer.chat_template = "{{ raise_exception('only user turns') }}"
    with pytest.raises(ChatFormatError, match="only user turns"):
        render_chat_prompt(tokenizer, [{"role": "user", "content": "hi"}])
