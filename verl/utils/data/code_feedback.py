"""``CodeFeedbackDataset``: load raw code data, clean it, save verl parquet (the guide's data step).

    from verl.utils.data import CodeFeedbackDataset

    dataset = CodeFeedbackDataset.load_from_json("data/code_feedback.jsonl")
    processed = dataset.process(max_seq_length=2048, tokenizer_path="DIR", reward_scaling=True)
    processed.save("data/processed_code_data")          # train.parquet (+ test.parquet), stats.json
    processed.stats                                      # kept, and dropped by reason

Rows may be in any format :mod:`verl.utils.data.code_formats` reads (recognised by their fields: APPS/TACO
``input_output``, HumanEval ``entry_point`` + ``test``, MBPP ``test_list``, LeetCode ``entry_point`` + ``tests``) or
already verl rows (``prompt`` + ``reward_model``). An optional ``score`` (or ``rating``) is the row's feedback score:
with ``reward_scaling=True`` it is also stored min-max scaled to [-1, 1] as ``extra_info.scaled_score``.

``process`` drops, and counts by reason: rows that do not convert; duplicates (the same problem text, whitespace
ignored); rows whose prompt plus reference solution is longer than ``max_seq_length`` tokens; and, with
``validate=True``, rows whose reference solution does not parse or does not pass its own tests in the sandbox. A line
of the file that is not JSON is an error naming the file and line.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from verl.utils.data.code_formats import from_apps, from_humaneval, from_leetcode, from_mbpp


def detect_format(row: dict[str, Any]) -> str:
    """The format of a raw row, from its fields (module docstring); ``ValueError`` when none matches."""
    if "prompt" in row and "reward_model" in row:
        return "verl"
    if "input_output" in row:
        return "apps"
    if "entry_point" in row and "test" in row:
        return "humaneval"
    if "test_list" in row:
        return "mbpp"
    if "entry_point" in row and "tests" in row:
        return "leetcode"
    raise ValueError(
        f"unknown code-data format (fields {sorted(row)}): expected APPS/TACO 'input_output', HumanEval "
        "'entry_point'+'test', MBPP 'test_list', LeetCode 'entry_point'+'tests', or a verl row"
    )


_CONVERTERS = {"apps": from_apps, "humaneval": from_humaneval, "mbpp": from_mbpp, "leetcode": from_leetcode}


class CodeFeedbackDataset:
    """A list of rows (raw after ``load_from_json``, verl rows after ``process``) and what processing dropped."""

    def __init__(self, rows: list[dict[str, Any]], source: str = "", stats: dict[str, Any] | None = None):
        self.rows = rows
        self.source = source
        self.stats = stats or {}

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def load_from_json(cls, path: str) -> CodeFeedbackDataset:
        """Rows of a JSON Lines file (one object per line) or a JSON file holding a list of objects."""
        with open(path, encoding="utf-8-sig") as f:
            is_list = f.read(4096).lstrip().startswith("[")
        if is_list:
            with open(path, encoding="utf-8-sig") as f:
                rows = json.load(f)
        else:
            from verl.data.loader import read_jsonl

            rows, _ = read_jsonl(path)
        bad = [i for i, r in enumerate(rows) if not isinstance(r, dict)]
        if bad:
            raise ValueError(f"{path}: row {bad[0]} is not a JSON object")
        return cls(rows, source=path)

    def process(
        self,
        max_seq_length: int = 2048,
        tokenizer_path: str | None = None,
        reward_scaling: bool = False,
        validate: bool = False,
        split: str = "train",
        case_timeout_s: float = 5.0,
    ) -> CodeFeedbackDataset:
        """Convert, de-duplicate, length-filter and (``validate``) check every row; see the module docstring."""
        dropped: Counter = Counter()
        examples: dict[str, str] = {}
        tokenizer = None
        if tokenizer_path:
            from verl.utils.model import load_tokenizer

            tokenizer = load_tokenizer(tokenizer_path)
        out, seen = [], set()
        for index, raw in enumerate(self.rows):
            try:
                fmt = detect_format(raw)
                row = raw if fmt == "verl" else _CONVERTERS[fmt](raw, index=index, split=split)
            except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
                dropped["unconvertible"] += 1
                examples.setdefault("unconvertible", f"row {index}: {e}")
                continue
            problem = " ".join(row["prompt"][-1]["content"].split())
            if problem in seen:
                dropped["duplicate"] += 1
                continue
            seen.add(problem)
            reference = (row.get("extra_info") or {}).get("reference_solution") or ""
            if tokenizer is not None:
                n = len(tokenizer(row["prompt"][-1]["content"] + reference, add_special_tokens=False)["input_ids"])
                if n > max_seq_length:
                    dropped["too_long"] += 1
                    examples.setdefault("too_long", f"row {index}: {n} tokens > {max_seq_length}")
                    continue
            if validate:
                reason = _check_reference(row, reference, case_timeout_s)
                if reason:
                    dropped[reason] += 1
                    examples.setdefault(reason, f"row {index}")
                    continue
            score = raw.get("score", raw.get("rating"))
            if score is not None:
                row.setdefault("extra_info", {})["score"] = float(score)
            out.append(row)
        if reward_scaling:
            _scale_scores(out)
        stats = {"input": len(self.rows), "kept": len(out), "dropped": dict(dropped), "examples": examples}
        return CodeFeedbackDataset(out, self.source, stats)

    def save(self, path: str, test_fraction: float = 0.0, seed: int = 0) -> dict[str, str]:
        """Write ``train.parquet`` (and ``test.parquet`` with ``test_fraction`` of the rows, chosen by ``seed``) and
        ``stats.json`` under the directory ``path``; returns the files written."""
        import random

        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.rows:
            raise ValueError(f"nothing to save: every row was dropped ({self.stats.get('dropped')})")
        os.makedirs(path, exist_ok=True)
        order = list(range(len(self.rows)))
        random.Random(seed).shuffle(order)
        n_test = int(round(test_fraction * len(order)))
        parts = {"train": sorted(order[n_test:]), "test": sorted(order[:n_test])}
        written = {}
        for name, indices in parts.items():
            if not indices:
                continue
            rows = [
                dict(self.rows[i], extra_info={**self.rows[i].get("extra_info", {}), "split": name}) for i in indices
            ]
            written[name] = os.path.join(path, f"{name}.parquet")
            pq.write_table(pa.Table.from_pylist(rows), written[name])
        with open(os.path.join(path, "stats.json"), "w") as f:
            json.dump(self.stats, f, indent=1)
        return written


def _check_reference(row: dict[str, Any], reference: str, case_timeout_s: float) -> str | None:
    """None when the reference solution passes all its tests; else the reason to drop the row."""
    from verl.sandbox.testcases import run_test_cases
    from verl.utils.reward_score.code_reward import check_syntax

    if not reference:
        return "no_reference"
    if check_syntax(reference) == 0.0:
        return "reference_syntax_error"
    run = run_test_cases(reference, row["reward_model"]["ground_truth"], case_timeout_s=case_timeout_s)
    return None if run.all_passed else "reference_fails_tests"


def _scale_scores(rows: list[dict[str, Any]]) -> None:
    scores = [r["extra_info"]["score"] for r in rows if "score" in r.get("extra_info", {})]
    if not scores:
        return
    low, high = min(scores), max(scores)
    for r in rows:
        if "score" in r.get("extra_info", {}):
            s = r["extra_info"]["score"]
            r["extra_info"]["scaled_score"] = 0.0 if high == low else 2 * (s - low) / (high - low) - 1
