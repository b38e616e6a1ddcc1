"""The tool-calling tiny tokenizer and chat template: exact rendering, single tool tokens, and the prefix property the
agent loop and multi-turn SFT rely on."""

import json

import pytest
from transformers import AutoTokenizer

from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.models.tiny import TinyModelConfig, build_tokenizer, save_tiny_model
from verl.utils.model import load_tokenizer

SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. 2*3"}},
            "required": ["expression"],
        },
    },
}
LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": {"properties": {"key": {}, "table": {}}}}}
CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "4821*37"}}}
CONVERSATION = [
    {"role": "user", "content": "What is 4821 * 37?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "178377"},
    {"role": "assistant", "content": "#### 178377"},
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    """Saved and loaded back with AutoTokenizer, as every trainer loads it."""
    path = tmp_path_factory.mktemp("tools-tok")
    build_tokenizer(tools=True).save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def test_renders_tools_calls_and_responses_exactly(tok):
    text = tok.apply_chat_template(CONVERSATION, tools=[SCHEMA], tokenize=False)
    assert text == (
        "<|im_start|>system\n<tools>calculator(expression)</tools><|im_end|>"
        "<|im_start|>user\nWhat is 4821 * 37?<|im_end|>"
        '<|im_start|>assistant\n<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}'
        "</tool_call><|im_end|>"
        "<|im_start|>user\n<tool_response>178377</tool_response><|im_end|>"
        "<|im_start|>assistant\n#### 178377<|im_end|>"
    )


def test_system_message_bare_functions_string_arguments_and_no_tools(tok):
    call = {"function": {"name": "lookup", "arguments": '{"key": "a"}'}}  # OpenAI's layout: arguments as JSON text
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call, call]},
    ]
    text = tok.apply_chat_template(messages, tools=[SCHEMA["function"], LOOKUP], tokenize=False)
    assert text == (
        "<|im_start|>system\nBe brief.\n<tools>calculator(expression) lookup(key, table)</tools><|im_end|>"
        "<|im_start|>user\nQ<|im_end|><|im_start|>assistant\nLet me look.\n"
        '<tool_call>{"name": "lookup", "arguments": {"key": "a"}}</tool_call>'
        '<tool_call>{"name": "lookup", "arguments": {"key": "a"}}</tool_call><|im_end|>'
    )
    # no tools, no system message: no system turn at all (verl's system-prompt probe finds none)
    plain = tok.apply_chat_template(CONVERSATION[:1], add_generation_prompt=True, tokenize=False)
    assert plain == "<|im_start|>user\nWhat is 4821 * 37?<|im_end|><|im_start|>assistant\n"


def test_tool_tags_are_single_non_special_tokens_and_other_ids_unchanged(tok):
    plain = build_tokenizer()
    ids = tok.convert_tokens_to_ids(["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"])
    assert ids == [259, 260, 261, 262] and len(tok) == 263
    text = '<tool_call>{"name": "calculator"}</tool_call>'
    encoded = tok(text, add_special_tokens=False)["input_ids"]
    assert encoded[0] == 259 and encoded[-1] == 260 and len(encoded) == 2 + len('{"name": "calculator"}')
    # every byte and chat marker keeps its id: the tool tokenizer extends the plain one
    sample = "What is 12 * 34?\n#### 408 héllo"
    assert tok(sample)["input_ids"] == plain(sample)["input_ids"]
    # not special: decoding for the tool parser keeps the tags
    assert tok.decode(encoded, skip_special_tokens=True) == text


def test_decoded_assistant_turn_parses_with_hermes(tok):
    text = tok.apply_chat_template(CONVERSATION[:2], tools=[SCHEMA], tokenize=False)
    turn = tok(text.rpartition("<|im_start|>assistant\n")[2], add_special_tokens=False)["input_ids"]
    parsed = ToolParser.get_tool_parser("hermes", tok).parse_ids(turn)
    assert parsed.errors == [] and parsed.content == ""
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == [("calculator", {"expression": "4821*37"})]


@pytest.mark.parametrize("tools", [[SCHEMA], None])
def test_every_prefix_renders_as_a_prefix(tok, tools):
    """Rendering messages[:k] (also with the generation prompt before an assistant turn) is a prefix of rendering
    messages[:k+1], in text and in token ids: the agent loop appends delta ids, SFT masks by them."""
    messages = [{"role": "system", "content": "S"}, *CONVERSATION, {"role": "user", "content": "again?"}]
    messages += [
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
        {"role": "assistant", "content": "ok"},
    ]
    for k in range(1, len(messages)):
        shorter = tok.apply_chat_template(messages[:k], tools=tools, tokenize=False)
        longer = tok.apply_chat_template(messages[: k + 1], tools=tools, tokenize=False)
        assert longer.startswith(shorter), k
        ids_short = tok(shorter, add_special_tokens=False)["input_ids"]
        ids_long = tok(longer, add_special_tokens=False)["input_ids"]
        assert ids_long[: len(ids_short)] == ids_short, k
        if messages[k]["role"] == "assistant":
            prompted = tok.apply_chat_template(messages[:k], tools=tools, add_generation_prompt=True, tokenize=False)
            assert prompted.startswith(shorter) and longer.startswith(prompted), k


def test_model_tokens_then_delta_equal_the_whole_rendering(tok):
    """The model's turn ends at its EOS; the tool message rendered alone (verl's delta) continues it exactly."""
    whole = tok.apply_chat_template(CONVERSATION, tools=[SCHEMA], tokenize=False)
    prompt = tok.apply_chat_template(CONVERSATION[:1], tools=[SCHEMA], add_generation_prompt=True, tokenize=False)
    call_turn = '<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call><|im_end|>'
    delta = tok.apply_chat_template(CONVERSATION[2:3], add_generation_prompt=True, tokenize=False)
    assert prompt + call_turn + delta + "#### 178377<|im_end|>" == whole


def test_builtin_spec_and_saved_model(tmp_path):
    tok = load_tokenizer("builtin://tiny-qwen2?tools=true&hidden_size=32&num_layers=1&intermediate_size=64")
    assert len(tok) == 263 and "<tools>" in tok.chat_template
    path = save_tiny_model(str(tmp_path / "m"), TinyModelConfig(hidden_size=32, num_layers=1, tools=True))
    assert json.load(open(f"{path}/config.json"))["vocab_size"] == 263
    with pytest.raises(ValueError, match="hidden_size='x' is not a valid int"):
        load_tokenizer("builtin://tiny-qwen2?hidden_size=x")
