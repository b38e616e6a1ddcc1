"""RLHFDataset: the columns the reward needs, JSON-encoded message lists, and template errors that name the row."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
from verl.utils.model import load_tokenizer


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("builtin://tiny-qwen2-arith-sft")  # a chat template


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def test_the_reward_fn_key_column_is_carried(tmp_path, tok):
    rows = [{"prompt": "What is 1 + 2?", "task": "arithmetic", "reward_model": {"ground_truth": "3"}}]
    ds = RLHFDataset(_write(tmp_path / "d.parquet", rows), tok, reward_fn_key="task")
    batch = collate_prompts([ds[0]], tok.pad_token_id)
    assert batch.non_tensor_batch["task"].tolist() == ["arithmetic"]


def test_a_message_list_stored_as_json_text_is_a_message_list(tmp_path, tok):
    messages = [{"role": "user", "content": "What is 1 + 2?"}]
    plain = RLHFDataset(_write(tmp_path / "a.parquet", [{"prompt": messages}]), tok)
    encoded = RLHFDataset(_write(tmp_path / "b.parquet", [{"prompt": json.dumps(messages)}]), tok)
    assert encoded[0]["input_ids"] == plain[0]["input_ids"]


def test_a_chat_template_error_names_the_file_and_row(tmp_path, tok):
    tok = load_tokenizer("builtin://tiny-qwen2-arith-sft")
    tok.chat_template = "{{ raise_exception('System role not supported') if messages[0]['role'] == 'system' }}x"
    rows = [{"prompt": [{"role": "user", "content": "hi"}]}, {"prompt": [{"role": "system", "content": "be nice"}]}]
    path = _write(tmp_path / "d.parquet", rows)
    with pytest.raises(ValueError, match=r"d.parquet, row 1: the tokenizer's chat template rejected.*System role"):
        RLHFDataset(path, tok)


def test_collate_fn_stacks_tensors_and_keeps_one_object_per_row():
    import torch

    from verl.utils.dataset.rl_dataset import collate_fn

    items = [
        {"input_ids": torch.tensor([1, 2]), "messages": [{"role": "user", "content": "a"}], "ids": [1, 2], "k": {}},
        {"input_ids": torch.tensor([3, 4]), "messages": [{"role": "user", "content": "b"}], "ids": [3, 4], "k": {}},
    ]
    batch = collate_fn(items)
    assert torch.equal(batch["input_ids"], torch.tensor([[1, 2], [3, 4]]))
    for key in ("messages", "ids", "k"):  # equal-length lists stay one element per row, not a 2-D array
        assert batch[key].shape == (2,) and batch[key][1] == items[1][key]


def test_agent_name_is_carried_and_rows_without_it_read_none(tmp_path, tok):
    rows = [{"prompt": "What is 1 + 2?", "agent_name": "tool_agent"}, {"prompt": "What is 2 + 2?", "agent_name": None}]
    ds = RLHFDataset(_write(tmp_path / "d.parquet", rows), tok)
    batch = collate_prompts([ds[0], ds[1]], tok.pad_token_id)
    assert batch.non_tensor_batch["agent_name"].tolist() == ["tool_agent", None]


def test_an_agent_loop_run_keeps_the_messages_for_its_loops(tmp_path, tok):
    from verl.utils.config import load_config
    from verl.utils.dataset.rl_dataset import build_dataset

    files = _write(tmp_path / "d.parquet", [{"prompt": "What is 1 + 2?"}])
    sync = build_dataset(load_config("ppo_trainer"), files, tok)
    agent = build_dataset(load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=async"]), files, tok)
    assert "raw_prompt" not in sync[0]
    assert agent[0]["raw_prompt"] == [{"role": "user", "content": "What is 1 + 2?"}]
    assert agent[0]["input_ids"] == sync[0]["input_ids"]
