"""make_pretokenized_dataloader: JSONL prompts -> left-padded DataProto batches; bad lines name file and line."""

from __future__ import annotations

import json

import pytest

from verl.data import DataLoader, make_pretokenized_dataloader

MODEL = "builtin://tiny-qwen2-arith-sft"
OPEN_ENDED_PROMPTS = ["请写一首关于春天的诗", "解释什么是光合作用", "推荐三部经典的科幻电影"]


def write_jsonl(path, rows) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows))
    return str(path)


def test_batches_are_left_padded_prompts_with_the_chat_template(tmp_path):
    rows = [{"prompt": p} for p in OPEN_ENDED_PROMPTS] + [
        {"prompt": [{"role": "user", "content": "What is 2 + 3?"}], "data_source": "arithmetic", "ground_truth": "5"}
    ]
    loader = make_pretokenized_dataloader(
        file_path=write_jsonl(tmp_path / "data.jsonl", rows), tokenizer_name_or_path=MODEL, batch_size=3, seq_len=512
    )
    assert isinstance(loader, DataLoader) and len(loader) == 2
    batches = list(loader)
    assert [len(b) for b in batches] == [3, 1]
    b = batches[0].batch
    assert set(b.keys()) == {"input_ids", "attention_mask", "position_ids"}
    assert (b["attention_mask"][:, -1] == 1).all()  # left padding: every prompt ends at the right edge
    from verl.utils.model import load_tokenizer

    text = load_tokenizer(MODEL).decode(b["input_ids"][0][b["attention_mask"][0].bool()])
    assert text.startswith("<|im_start|>user\n请写一首关于春天的诗") and text.endswith("<|im_start|>assistant\n")
    last = batches[1].non_tensor_batch
    assert last["data_source"][0] == "arithmetic" and last["reward_model"][0] == {"ground_truth": "5"}
    assert batches[0].non_tensor_batch["data_source"][0] == "unknown"


def test_bad_lines_name_the_file_and_line(tmp_path):
    bad_json = write_jsonl(tmp_path / "a.jsonl", [{"prompt": "ok"}, "{not json"])
    with pytest.raises(ValueError, match=r"a\.jsonl, line 2: not valid JSON"):
        make_pretokenized_dataloader(bad_json, MODEL, batch_size=2, seq_len=64)
    no_prompt = write_jsonl(tmp_path / "b.jsonl", [{"prompt": "ok"}, "", {"text": "hi"}])
    with pytest.raises(ValueError, match=r"b\.jsonl, line 3: no 'prompt' field"):
        make_pretokenized_dataloader(no_prompt, MODEL, batch_size=2, seq_len=64)
    too_long = write_jsonl(tmp_path / "c.jsonl", [{"prompt": "x" * 100}])
    with pytest.raises(ValueError, match=r"c\.jsonl, line 1: the prompt has \d+ tokens, more than seq_len=32"):
        make_pretokenized_dataloader(too_long, MODEL, batch_size=2, seq_len=32)
    cut = make_pretokenized_dataloader(too_long, MODEL, batch_size=2, seq_len=32, truncation="left")
    assert next(iter(cut)).batch["input_ids"].shape == (1, 32)
    with pytest.raises(FileNotFoundError):
        make_pretokenized_dataloader(str(tmp_path / "missing.jsonl"), MODEL)


def test_a_utf8_bom_is_not_part_of_the_first_line(tmp_path):
    from verl.data.loader import read_jsonl

    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"prompt": "What is 1 + 2?"}\n')
    records, _ = read_jsonl(str(path))
    assert records[0]["prompt"] == "What is 1 + 2?"
