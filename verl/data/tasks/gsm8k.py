"""Convert GSM8K files a user has locally into verl-format rows (as public verl's gsm8k script does).

Accepted inputs, in GSM8K's own formats:

* ``train.jsonl`` / ``test.jsonl`` (github.com/openai/grade-school-math), one
  ``{"question": ..., "answer": "...reasoning...\\n#### 72"}`` object per line;
* the Hugging Face layout ``main/train-00000-of-00001.parquet`` /
  ``main/test-00000-of-00001.parquet`` with the same two columns.

Each row: data_source ``openai/gsm8k``, ability ``math``, prompt = question + instruction, ground
truth = the number after ``####`` with commas removed, extra_info {split, index, question, answer}.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
COLUMNS = ("question", "answer")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def extract_gsm8k_answer(answer: str) -> str:
    """The final answer after the last ``####``, commas removed (``"#### 1,200"`` -> ``"1200"``)."""
    if "####" not in answer:
        raise ValueError("answer has no '####' line; GSM8K answers end with a line like '#### 72'")
    final = answer.rsplit("####", 1)[1].strip().replace(",", "").rstrip(".")
    if not _NUMBER.fullmatch(final):
        raise ValueError(f"the text after '####' is not a number: {final!r}; it should look like '#### 72'")
    return final


def _check_record(record: Any) -> tuple[str, str]:
    if not isinstance(record, Mapping):
        raise ValueError(f"expected an object with keys {list(COLUMNS)}, got {type(record).__name__}")
    missing = [c for c in COLUMNS if c not in record or record[c] is None]
    if missing:
        raise ValueError(f"missing {missing}; every GSM8K record needs both 'question' and 'answer'")
    question, answer = record["question"], record["answer"]
    if not isinstance(question, str) or not isinstance(answer, str):
        raise ValueError("'question' and 'answer' must both be strings")
    extract_gsm8k_answer(answer)
    return question, answer


def convert_gsm8k_record(record: Mapping[str, Any], split: str, index: int) -> dict[str, Any]:
    """Turn one GSM8K ``{"question", "answer"}`` record into a verl row."""
    question, answer = _check_record(record)
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": question + " " + INSTRUCTION}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": extract_gsm8k_answer(answer)},
        "extra_info": {"split": split, "index": index, "question": question, "answer": answer},
    }


_FIX = "fix or remove it: each record needs a 'question' string and an 'answer' string ending in '#### <number>'"


def load_gsm8k_split(path: str | os.PathLike) -> list[dict[str, str]]:
    """Read and check one GSM8K file (``.jsonl`` or ``.parquet``); return its ``{question, answer}`` records.

    Problems raise a ValueError naming the file and the line (jsonl, 1-based) or row (parquet, 0-based).
    """
    path = Path(path)
    records: list[dict[str, str]] = []
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(
                f"{path}: missing column(s) {missing} (found {table.column_names}); "
                "expected GSM8K's 'main' config with columns 'question' and 'answer'"
            )
        for row_number, record in enumerate(table.select(list(COLUMNS)).to_pylist()):
            try:
                question, answer = _check_record(record)
            except ValueError as exc:
                raise ValueError(f"{path}: row {row_number}: {exc}; {_FIX}") from None
            records.append({"question": question, "answer": answer})
        return records

    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {line_number}: not valid JSON ({exc.msg}); {_FIX}") from None
            try:
                question, answer = _check_record(record)
            except ValueError as exc:
                raise ValueError(f"{path}: line {line_number}: {exc}; {_FIX}") from None
            records.append({"question": question, "answer": answer})
    return records


def find_gsm8k_split_files(input_dir: str | os.PathLike, split: str) -> list[Path]:
    """Locate a split in ``input_dir``: ``<split>.jsonl``, else ``main/<split>-*.parquet`` (or ``<split>-*.parquet``)."""
    root = Path(input_dir)
    jsonl = root / f"{split}.jsonl"
    if jsonl.is_file():
        return [jsonl]
    for folder in (root / "main", root):
        shards = sorted(folder.glob(f"{split}-*.parquet"))
        if shards:
            return shards
    raise FileNotFoundError(
        f"no GSM8K {split} split in {root}: expected {split}.jsonl or main/{split}-00000-of-00001.parquet "
        "(download GSM8K from github.com/openai/grade-school-math or the openai/gsm8k dataset first)"
    )


def convert_gsm8k_split(files: list[Path], split: str) -> list[dict[str, Any]]:
    """Convert the records of one split (possibly several shards) into rows indexed 0..n-1."""
    records = [record for path in files for record in load_gsm8k_split(path)]
    return [convert_gsm8k_record(record, split, index) for index, record in enumerate(records)]


def convert_gsm8k_dir(input_dir: str | os.PathLike, local_dir: str | os.PathLike) -> dict[str, tuple[str, int]]:
    """Convert GSM8K's train and test splits found in ``input_dir`` to ``local_dir/{train,test}.parquet``.

    Returns ``{split: (path, row count)}``. Both splits are read and checked before anything is written.
    """
    from verl.data.tasks import write_rows_to_parquet

    rows = {split: convert_gsm8k_split(find_gsm8k_split_files(input_dir, split), split) for split in ("train", "test")}
    return {
        split: (write_rows_to_parquet(split_rows, Path(local_dir) / f"{split}.parquet"), len(split_rows))
        for split, split_rows in rows.items()
    }
