"""Convert MATH files a user has locally into verl-format rows (as public verl's math_dataset script does).

Accepted inputs, in MATH's own formats:

* Hendrycks et al.'s release: ``train/<subject>/<id>.json`` and ``test/<subject>/<id>.json``, one
  ``{"problem", "level", "type", "solution"}`` object per file;
* one file per split: ``<split>.jsonl`` or ``<split>-*.parquet`` (also under ``data/``), with columns
  ``problem`` and ``solution`` (the Hugging Face ``DigitalLearningGmbH/MATH-lighteval`` layout) or ``problem`` and
  ``answer`` (MATH-500's ``test.jsonl``, which has only a test split).

Each row: data_source ``DigitalLearningGmbH/MATH-lighteval`` (scored by ``verl.utils.reward_score.math``), ability
``math``, prompt = problem + instruction, ground truth = ``answer`` when given, else the last ``\\boxed{...}`` of the
solution; extra_info {split, index, level, type}. A record whose answer cannot be found names its file and line/row.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl.utils.reward_score.math import last_boxed_only_string, remove_boxed

DATA_SOURCE = "DigitalLearningGmbH/MATH-lighteval"
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


def math_answer(record: Mapping[str, Any]) -> str:
    """The ground truth of a MATH record: its ``answer``, else the last ``\\boxed{}`` of its ``solution``."""
    if not isinstance(record.get("problem"), str):
        raise ValueError("missing 'problem' (a string)")
    if isinstance(record.get("answer"), str) and record["answer"].strip():
        return record["answer"].strip()
    solution = record.get("solution")
    if not isinstance(solution, str):
        raise ValueError("needs an 'answer' or a 'solution' string")
    answer = remove_boxed(last_boxed_only_string(solution))
    if answer is None:
        raise ValueError("the solution has no \\boxed{...} answer (and there is no 'answer' field)")
    return answer


def convert_math_record(record: Mapping[str, Any], split: str, index: int) -> dict[str, Any]:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": record["problem"] + " " + INSTRUCTION}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": math_answer(record)},
        "extra_info": {
            "split": split,
            "index": index,
            "level": str(record.get("level") or ""),
            "type": str(record.get("type") or ""),
        },
    }


def _records(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    """``(where, record)`` pairs of one file: a JSON object file, a JSONL file or a parquet file."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [(f"{path}: row {i}", r) for i, r in enumerate(pq.read_table(path).to_pylist())]
    if path.suffix == ".json":
        with open(path, encoding="utf-8") as f:
            try:
                return [(str(path), json.load(f))]
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not valid JSON ({exc.msg})") from None
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    out.append((f"{path}: line {n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: line {n}: not valid JSON ({exc.msg})") from None
    return out


def find_math_split_files(input_dir: str | os.PathLike, split: str) -> list[Path]:
    """A split's files in ``input_dir`` (see the module docstring); an empty list when the split is absent."""
    root = Path(input_dir)
    per_problem = sorted((root / split).glob("*/*.json"))
    if per_problem:
        return per_problem
    for folder in (root, root / "data"):
        jsonl = folder / f"{split}.jsonl"
        if jsonl.is_file():
            return [jsonl]
        shards = sorted(folder.glob(f"{split}-*.parquet"))
        if shards:
            return shards
    return []


def convert_math_dir(input_dir: str | os.PathLike, local_dir: str | os.PathLike) -> dict[str, tuple[str, int]]:
    """Convert the train and test splits found in ``input_dir`` to ``local_dir/{split}.parquet`` (a missing train
    split is skipped: MATH-500 is test only). Every record is checked before anything is written."""
    from verl.data.tasks import write_rows_to_parquet

    rows: dict[str, list[dict[str, Any]]] = {}
    for split in ("train", "test"):
        files = find_math_split_files(input_dir, split)
        if not files:
            continue
        converted = []
        for path in files:
            for where, record in _records(path):
                try:
                    converted.append(convert_math_record(record, split, len(converted)))
                except (ValueError, TypeError, AttributeError) as exc:
                    raise ValueError(f"{where}: {exc}; fix or remove the record") from None
        rows[split] = converted
    if "test" not in rows:
        raise FileNotFoundError(
            f"no MATH test split in {input_dir}: expected test/<subject>/<id>.json (the original release), "
            "test.jsonl, or test-*.parquet (also under data/)"
        )
    return {
        split: (write_rows_to_parquet(split_rows, Path(local_dir) / f"{split}.parquet"), len(split_rows))
        for split, split_rows in rows.items()
    }
