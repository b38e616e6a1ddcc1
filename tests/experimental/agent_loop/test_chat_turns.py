"""Token ids of appended turns (`ChatTurns`) and verl's tokenization sanity check, on the shipped tokenizer with its
own template and with a Qwen2.5-style one (a default system prompt, tool results inside a user turn)."""

from __future__ import annotations

import copy

import pytest

from verl.experimental.agent_loop.chat_turns import ChatTurns
from verl.experimental.agent_loop.tokenization_check import check_tokenization, token_diffs
from verl.utils.model import ASSETS_DIR, load_tokenizer

# Qwen2.5's shape, written for this test: a system block when the conversation has none, tool results grouped in
# one user turn as <tool_response> blocks, <|im_end|>\n after every turn
QWEN_STYLE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'tool' %}"
    "{% if loop.index0 == 0 or messages[loop.index0 - 1]['role'] != 'tool' %}<|im_start|>user{% endif %}"
    "\n<tool_response>\n{{ m['content'] }}\n</tool_response>"
    "{% if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}<|im_end|>\n{% endif %}"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def shipped():
    return load_tokenizer(f"{ASSETS_DIR}/tiny-qwen2-arith-sft")


@pytest.fixture(scope="module")
def qwen_style(shipped):
    tokenizer = copy.deepcopy(shipped)
    tokenizer.chat_template = QWEN_STYLE
    return tokenizer


def encode(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_the_template_facts_are_found(shipped, qwen_style):
    assert ChatTurns(shipped).system_prefix == "" and ChatTurns(shipped).assistant_closing == "<|im_end|>\n"
    turns = ChatTurns(qwen_style)
    assert turns.system_prefix == "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    assert turns.assistant_closing == "<|im_end|>\n"
    assert ChatTurns.of(qwen_style) is ChatTurns.of(qwen_style)


@pytest.mark.parametrize("which", ["shipped", "qwen_style"])
def test_a_trajectory_built_turn_by_turn_equals_the_rendering_of_its_conversation(which, request):
    tokenizer = request.getfixturevalue(which)
    turns = ChatTurns(tokenizer)
    messages = [{"role": "user", "content": "What is 4821*37?"}]
    ids = turns.prompt_ids(messages)
    model_turn_1 = encode(tokenizer, '<tool_call>{"name": "calculator"}</tool_call>') + [tokenizer.eos_token_id]
    ids += model_turn_1
    messages.append({"role": "assistant", "content": turns.assistant_content(model_turn_1)})
    tool = [{"role": "tool", "content": "178377"}, {"role": "tool", "content": "ok"}]
    ids += turns.delta_ids(tool, turns.bridge_after(model_turn_1, stopped=True))
    messages += tool
    model_turn_2 = encode(tokenizer, "#### 178377") + [tokenizer.eos_token_id]
    ids += model_turn_2
    messages.append({"role": "assistant", "content": turns.assistant_content(model_turn_2)})
    whole = encode(tokenizer, turns.render(messages, add_generation_prompt=False))
    assert ids + encode(tokenizer, turns.bridge_after(model_turn_2, stopped=True)) == whole
    diffs = check_tokenization("strict", turns, messages, None, ids, (model_turn_2, True), "row 0")
    assert diffs == []


def test_verls_rendering_without_the_bridge_differs_by_a_newline(qwen_style):
    """What verl appends (the tool message alone) lacks the newline after the model's <|im_end|>: strict reports it,
    ignore_strippable does not."""
    turns = ChatTurns(qwen_style)
    messages = [{"role": "user", "content": "q"}]
    answer = encode(qwen_style, "a") + [qwen_style.eos_token_id]
    ids = turns.prompt_ids(messages) + answer + turns.delta_ids([{"role": "tool", "content": "r"}], bridge="")
    messages += [{"role": "assistant", "content": "a"}, {"role": "tool", "content": "r"}]
    strict = check_tokenization("strict", turns, messages, None, ids, None, "row 3")
    assert len(strict) == 1 and strict[0].expected_text == "\n" and strict[0].actual_text == ""
    assert check_tokenization("ignore_strippable", turns, messages, None, ids, None, "row 3") == []
    assert check_tokenization("disable", turns, messages, None, [1, 2, 3], None, "row 3") == []


def test_a_rewritten_turn_is_reported_even_when_ignoring_whitespace(shipped, caplog):
    turns = ChatTurns(shipped)
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "the answer"}]
    ids = turns.prompt_ids(messages[:1]) + encode(shipped, "an answer") + [shipped.eos_token_id]
    diffs = check_tokenization("ignore_strippable", turns, messages, None, ids, (ids[-3:], True), "row 7")
    assert diffs and "the" in diffs[0].expected_text
    assert "row 7: the trajectory's token ids differ" in caplog.text


def test_an_unknown_mode_names_the_key(shipped):
    with pytest.raises(ValueError, match="tokenization_sanity_check_mode='loose'"):
        check_tokenization("loose", ChatTurns(shipped), [], None, [], None, "row 0")


def test_token_diffs_decode_both_sides(shipped):
    diffs = token_diffs(encode(shipped, "abcd"), encode(shipped, "abXd"), shipped)
    assert [(d.expected_text, d.actual_text) for d in diffs] == [("c", "X")]


def test_a_tool_turn_after_a_cut_model_turn_gets_the_whole_closing(shipped):
    turns = ChatTurns(shipped)
    assert turns.bridge_after(encode(shipped, "partial"), stopped=False) == "<|im_end|>\n"
    assert turns.bridge_after([shipped.eos_token_id], stopped=True) == "\n"


def test_a_tokenizer_without_a_chat_template_is_an_error_naming_the_fix(shipped):
    bare = copy.deepcopy(shipped)
    bare.chat_template = None
    with pytest.raises(ValueError, match="no chat template.*chat_template"):
        ChatTurns(bare)
