import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.utils.dataset.sft_dataset import SFTDataset
from verl.utils.model import load_tokenizer


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return load_tokenizer(tiny_model_dir, padding_side="right")


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def _row(q="What is 1 + 2?", a="1 + 2 = 3\n#### 3"):
    return {"prompt": [{"role": "user", "content": q}], "extra_info": {"answer": a}}


def test_loss_mask_covers_response_and_eos_only(tmp_path, tok):
    ds = SFTDataset(_write(tmp_path / "d.parquet", [_row(), _row("Hi?", "ok")]), tok)
    batch = ds.collate([ds[0], ds[1]])
    ids, mask, attn = batch["input_ids"][0], batch["loss_mask"][0], batch["attention_mask"][0]
    target = tok.decode(ids[mask.bool()])
    assert target == "1 + 2 = 3\n#### 3<|im_end|>"
    assert tok.decode(ids[: int((1 - mask).sum())]).endswith("<|im_start|>assistant\n")
    # the shorter row is right-padded with pad tokens that neither attend nor count
    short_len = int(batch["attention_mask"][1].sum())
    assert (batch["input_ids"][1, short_len:] == tok.pad_token_id).all()
    assert batch["loss_mask"][1, short_len:].sum() == 0 and attn.sum() == len(ds[0][0])


def test_plain_string_prompt_is_one_user_turn(tmp_path, tok):
    ds = SFTDataset(_write(tmp_path / "d.parquet", [{"prompt": "Hi?", "extra_info": {"answer": "yo"}}]), tok)
    assert tok.decode(ds[0][0]).startswith("<|im_start|>user\nHi?<|im_end|>")


def test_missing_prompt_column_names_file_and_columns(tmp_path, tok):
    path = _write(tmp_path / "noprompt.parquet", [{"question": "x", "extra_info": {"answer": "y"}}])
    with pytest.raises(KeyError, match=r"noprompt\.parquet.*no column 'prompt'.*data\.prompt_key"):
        SFTDataset(path, tok)


def test_malformed_row_names_file_and_row(tmp_path, tok):
    rows = [_row(), {"prompt": [{"role": "user", "content": None}], "extra_info": {"answer": "y"}}]
    path = _write(tmp_path / "bad.parquet", rows)
    with pytest.raises(ValueError, match=r"bad\.parquet, row 1: malformed prompt"):
        SFTDataset(path, tok)
    path = _write(tmp_path / "noanswer.parquet", [_row(), _row(a=None)])
    with pytest.raises(KeyError, match=r"noanswer\.parquet, row 1: no value at key 'extra_info\.answer'"):
        SFTDataset(path, tok)


def test_not_parquet_and_missing_file(tmp_path, tok):
    bogus = tmp_path / "data.parquet"
    bogus.write_text("question,answer\n1,2\n")
    with pytest.raises(ValueError, match=r"data\.parquet' is not a readable parquet file"):
        SFTDataset(str(bogus), tok)
    with pytest.raises(FileNotFoundError, match=r"does not exist.*builtin://arithmetic/train"):
        SFTDataset(str(tmp_path / "missing.parquet"), tok)


def test_truncation_modes(tmp_path, tok):
    path = _write(tmp_path / "long.parquet", [_row(q="x" * 50, a="y" * 50)])
    with pytest.raises(ValueError, match=r"row 0: \d+ tokens exceed data\.max_length=40.*truncation=left\|right"):
        SFTDataset(path, tok, max_length=40)
    left = SFTDataset(path, tok, max_length=80, truncation="left")
    right = SFTDataset(path, tok, max_length=80, truncation="right")
    assert len(left[0][0]) == len(right[0][0]) == 80 and left.num_truncated == right.num_truncated == 1
    assert tok.decode(left[0][0]).endswith("y<|im_end|>")  # left keeps the whole response
    assert tok.decode(right[0][0]).startswith("<|im_start|>user")  # right keeps the whole prompt
