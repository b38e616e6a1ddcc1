"""verl's MultiTurnSFTDataset: the loss mask is 1 exactly on the assistant's tokens (tool-call text and end-of-turn
token included) and 0 on system, user and tool tokens; bad rows name themselves."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from verl.data.tasks import make_task_dataset
from verl.models.tiny import build_tokenizer
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

CALL = {"type": "function", "function": {"name": "calculator", "arguments": '{"expression": "4821*37"}'}}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "calculator", "parameters": {"properties": {"expression": {"type": "string"}}}},
    }
]
TOOL_CHAT = [
    {"role": "user", "content": "What is 4821 * 37?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "178377"},
    {"role": "assistant", "content": "#### 178377"},
]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(tools=True)


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def _unpadded(item):
    n = int(item["attention_mask"].sum())
    return item["input_ids"][:n], item["loss_mask"][:n]


def test_mask_is_exactly_the_assistant_turns(tmp_path, tok):
    ds = MultiTurnSFTDataset(_write(tmp_path / "d.parquet", [{"messages": TOOL_CHAT, "tools": TOOLS}]), tok)
    ids, mask = _unpadded(ds[0])
    # the rendering written out by hand, as (text, trained?) pieces
    pieces = [
        ("<|im_start|>system\n<tools>calculator(expression)</tools><|im_end|>", 0),
        ("<|im_start|>user\nWhat is 4821 * 37?<|im_end|>", 0),
        ("<|im_start|>assistant\n", 0),
        ('<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call><|im_end|>', 1),
        ("<|im_start|>user\n<tool_response>178377</tool_response><|im_end|>", 0),
        ("<|im_start|>assistant\n", 0),
        ("#### 178377<|im_end|>", 1),
    ]
    expected_ids, expected_mask = [], []
    for text, trained in pieces:
        piece = tok(text, add_special_tokens=False)["input_ids"]
        expected_ids += piece
        expected_mask += [trained] * len(piece)
    assert ids.tolist() == expected_ids and mask.tolist() == expected_mask
    assert ids[mask.bool()][-1] == tok.eos_token_id  # the end-of-turn token is trained
    assert tok.convert_tokens_to_ids("<tool_call>") in ids[mask.bool()].tolist()
    assert tok.convert_tokens_to_ids("<tool_response>") in ids[~mask.bool()].tolist()


def test_system_and_several_turns_verl_item_layout(tmp_path, tok):
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 4+4?"},
        {"role": "assistant", "content": "8"},
    ]
    ds = MultiTurnSFTDataset(_write(tmp_path / "d.parquet", [{"messages": chat}]), tok, {"max_length": 128})
    item = ds[0]
    assert set(item) == {"input_ids", "attention_mask", "position_ids", "loss_mask"}
    assert all(v.shape == (128,) and v.dtype == torch.long for v in item.values())
    ids, mask = _unpadded(item)
    assert tok.decode(ids[mask.bool()]) == "4<|im_end|>8<|im_end|>"
    assert tok.decode(ids[~mask.bool()]) == (
        "<|im_start|>system\nBe brief.<|im_end|><|im_start|>user\nWhat is 2+2?<|im_end|><|im_start|>assistant\n"
        "<|im_start|>user\nAnd 4+4?<|im_end|><|im_start|>assistant\n"
    )
    n = len(ids)
    assert item["position_ids"][:n].tolist() == list(range(n)) and not item["loss_mask"][n:].any()
    assert (item["input_ids"][n:] == tok.pad_token_id).all()
    unpadded = MultiTurnSFTDataset(
        _write(tmp_path / "e.parquet", [{"messages": chat}]), tok, {"pad_mode": "no_padding"}
    )
    assert unpadded[0]["input_ids"].tolist() == ids.tolist() and "attention_mask" not in unpadded[0]
    batch = ds.collate([ds[0], unpadded[0]])  # padded to the longest row, not to max_length
    assert batch["input_ids"].shape == (2, n) and batch["loss_mask"].sum() == 2 * mask.sum()


def test_task_rows_and_verl_config_keys(tmp_path, tok):
    paths = make_task_dataset("calc_multiply", tmp_path, train_size=8, test_size=2, seed=0)
    config = {"max_length": 256, "multiturn": {"messages_key": "messages", "tools_key": "tools"}}
    ds = MultiTurnSFTDataset(paths["train"], tok, config, max_samples=5)
    assert len(ds) == 5
    for i in range(5):
        ids, mask = _unpadded(ds[i])
        trained = tok.decode(ids[mask.bool()], skip_special_tokens=True)
        assert trained.startswith('<tool_call>{"name": "calculator", "arguments": {"expression": "')
        assert "</tool_call>####" in trained


def test_bad_rows_name_the_row(tmp_path, tok):
    f = _write(tmp_path / "d.parquet", [{"messages": TOOL_CHAT}, {"messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(ValueError, match=r"d\.parquet, row 1: no assistant message"):
        MultiTurnSFTDataset(f, tok)
    with pytest.raises(KeyError, match="no column 'conversations'"):
        MultiTurnSFTDataset(f, tok, {"multiturn": {"messages_key": "conversations"}})
    long = _write(tmp_path / "long.parquet", [{"messages": TOOL_CHAT}])
    with pytest.raises(ValueError, match=r"long\.parquet, row 0: \d+ tokens exceed data\.max_length=40"):
        MultiTurnSFTDataset(long, tok, {"max_length": 40})
    left = MultiTurnSFTDataset(long, tok, {"max_length": 40, "truncation": "left"})
    ids, mask = _unpadded(left[0])
    assert len(ids) == 40 and left.num_truncated == 1  # the start is cut; the mask moves with the tokens
    assert tok.decode(ids[mask.bool()]) == "</tool_call><|im_end|>#### 178377<|im_end|>"
    with pytest.raises(ValueError, match="no assistant token is left"):
        MultiTurnSFTDataset(long, tok, {"max_length": 30, "truncation": "right"})  # user turn + prompt: 36


def test_template_that_rewrites_earlier_turns_is_refused(tmp_path):
    """A Qwen3-thinking-like template renders the last assistant turn differently from earlier ones: refused."""
    tok = build_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}{{ '\\n' }}"
        "{% if m['role'] == 'assistant' and not loop.last %}[old]{% endif %}{{ m['content'] }}<|im_end|>{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
    )
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    chat += [{"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]
    with pytest.raises(ValueError, match=r"row 0: the chat template renders the conversation up to message 1"):
        MultiTurnSFTDataset(_write(tmp_path / "d.parquet", [{"messages": chat}]), tok)


def test_parquet_null_fields_are_not_rendered(tmp_path, tok):
    """One parquet column holds every row's keys; a row's missing ones read back as None and must not render."""
    lookup = [
        {"type": "function", "function": {"name": "lookup", "parameters": {"properties": {"key": {"type": "string"}}}}}
    ]
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    f = _write(tmp_path / "d.parquet", [{"messages": chat, "tools": TOOLS}, {"messages": chat, "tools": lookup}])
    ds = MultiTurnSFTDataset(f, tok)
    assert tok.decode(_unpadded(ds[0])[0]).startswith("<|im_start|>system\n<tools>calculator(expression)</tools>")
    assert tok.decode(_unpadded(ds[1])[0]).startswith("<|im_start|>system\n<tools>lookup(key)</tools>")
