"""examples/data_preprocess/gsm8k.py and verl.data.tasks.gsm8k on a tiny GSM8K-format sample."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.data.tasks.gsm8k import (
    DATA_SOURCE,
    INSTRUCTION,
    convert_gsm8k_record,
    extract_gsm8k_answer,
    load_gsm8k_split,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "examples" / "data_preprocess" / "gsm8k.py"
FIXTURE = Path(__file__).parent / "fixtures" / "gsm8k_sample"
TRAIN_TRUTHS = ["39", "6", "6000", "14"]
TEST_TRUTHS = ["27", "270", "750"]


def _run(input_dir: Path, local_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--input_dir", str(input_dir), "--local_dir", str(local_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _source_records(split: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURE / f"{split}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_script_converts_jsonl(tmp_path):
    proc = _run(FIXTURE, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert f"train: {tmp_path / 'out' / 'train.parquet'} (4 rows)" in proc.stdout
    assert f"test: {tmp_path / 'out' / 'test.parquet'} (3 rows)" in proc.stdout
    for split, truths in (("train", TRAIN_TRUTHS), ("test", TEST_TRUTHS)):
        table = pq.read_table(tmp_path / "out" / f"{split}.parquet")
        assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        rows = table.to_pylist()
        assert [r["reward_model"]["ground_truth"] for r in rows] == truths
        for index, (row, source) in enumerate(zip(rows, _source_records(split))):
            assert row["data_source"] == "openai/gsm8k" and row["ability"] == "math"
            assert row["reward_model"]["style"] == "rule"
            assert row["prompt"] == [
                {
                    "role": "user",
                    "content": source["question"]
                    + ' Let\'s think step by step and output the final answer after "####".',
                }
            ]
            assert row["extra_info"] == {
                "split": split,
                "index": index,
                "question": source["question"],
                "answer": source["answer"],
            }


@pytest.mark.slow
def test_script_converts_hf_parquet_layout(tmp_path):
    main = tmp_path / "gsm8k" / "main"
    main.mkdir(parents=True)
    for split in ("train", "test"):
        pq.write_table(pa.Table.from_pylist(_source_records(split)), main / f"{split}-00000-of-00001.parquet")
    proc = _run(tmp_path / "gsm8k", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    rows = pq.read_table(tmp_path / "out" / "train.parquet").to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in rows] == TRAIN_TRUTHS
    assert rows[2]["extra_info"]["index"] == 2


def test_reference_answers_score_one():
    module = pytest.importorskip("verl.utils.reward_score")
    for index, record in enumerate(_source_records("train")):
        row = convert_gsm8k_record(record, "train", index)
        result = module.default_compute_score(DATA_SOURCE, record["answer"], row["reward_model"]["ground_truth"])
        assert (result["score"] if isinstance(result, dict) else result) == 1.0


def test_bad_row_names_file_and_line(tmp_path):
    data = tmp_path / "gsm8k"
    shutil.copytree(FIXTURE, data)
    lines = (data / "train.jsonl").read_text().splitlines()
    broken = json.loads(lines[2])
    broken["answer"] = broken["answer"].replace("#### ", "The answer is ")
    lines[2] = json.dumps(broken)
    (data / "train.jsonl").write_text("\n".join(lines) + "\n")
    proc = _run(data, tmp_path / "out")
    assert proc.returncode == 1
    assert f"{data / 'train.jsonl'}: line 3:" in proc.stderr
    assert "####" in proc.stderr and "fix or remove it" in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written when the input is bad


def test_missing_column_and_missing_files(tmp_path):
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "What is 1 + 1?", "solution": "#### 2"}]), bad)
    with pytest.raises(ValueError, match=r"bad\.parquet: missing column\(s\) \['answer'\]"):
        load_gsm8k_split(bad)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"question": "q", "answer": "#### 1"}\n\n{"answer": "#### 2"}\n')
    with pytest.raises(ValueError, match=r"rows\.jsonl: line 3: missing \['question'\]"):
        load_gsm8k_split(rows)
    rows.write_text("not json\n")
    with pytest.raises(ValueError, match=r"line 1: not valid JSON"):
        load_gsm8k_split(rows)
    proc = _run(tmp_path / "empty", tmp_path / "out")
    assert proc.returncode == 1 and "train.jsonl or main/train-00000-of-00001.parquet" in proc.stderr


def test_extract_and_convert_record():
    assert extract_gsm8k_answer("So 3 + 4 = <<3+4=7>>7.\n#### 7") == "7"
    assert extract_gsm8k_answer("... #### 1,234") == "1234"
    assert extract_gsm8k_answer("#### -5") == "-5"
    with pytest.raises(ValueError, match="not a number"):
        extract_gsm8k_answer("#### seven")
    row = convert_gsm8k_record({"question": "Q?", "answer": "a\n#### 3"}, "test", 9)
    assert row["prompt"][0]["content"] == "Q? " + INSTRUCTION
    assert row["reward_model"] == {"style": "rule", "ground_truth": "3"}
    assert row["extra_info"] == {"split": "test", "index": 9, "question": "Q?", "answer": "a\n#### 3"}
    with pytest.raises(ValueError, match="'####'"):
        convert_gsm8k_record({"question": "Q?", "answer": "3"}, "train", 0)
