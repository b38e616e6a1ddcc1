"""examples/data_preprocess/math_dataset.py and verl.data.tasks.math_dataset on tiny MATH-format samples, and the rows
they write scored by the boxed-answer rule through the RL reward path."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from verl.data.tasks.math_dataset import INSTRUCTION, convert_math_dir
from verl.utils.reward_score import default_compute_score

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "examples" / "data_preprocess" / "math_dataset.py"

PROBLEMS = [
    {"problem": "What is $1/2 + 1/4$?", "level": "Level 1", "type": "Prealgebra",
     "solution": "We have $\\frac12+\\frac14=\\boxed{\\frac{3}{4}}$."},
    {"problem": "Solve $x+1=3$.", "level": "Level 1", "type": "Algebra",
     "solution": "Subtracting, $x=\\boxed{2}$."},
]  # fmt: skip


def _original_release(root: Path) -> Path:
    for split in ("train", "test"):
        for i, record in enumerate(PROBLEMS):
            folder = root / split / record["type"].lower()
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i}.json").write_text(json.dumps(record))
    return root


def test_original_release_converts_and_scores(tmp_path):
    written = convert_math_dir(_original_release(tmp_path / "MATH"), tmp_path / "out")
    assert {split: count for split, (_, count) in written.items()} == {"train": 2, "test": 2}
    rows = pq.read_table(tmp_path / "out" / "test.parquet").to_pylist()
    truths = sorted(r["reward_model"]["ground_truth"] for r in rows)
    assert truths == ["2", "\\frac{3}{4}"]
    row = next(r for r in rows if r["reward_model"]["ground_truth"] == "2")
    assert row["prompt"][0]["content"] == "Solve $x+1=3$. " + INSTRUCTION
    assert row["extra_info"]["type"] == "Algebra" and row["ability"] == "math"
    # the written rows are scored by the boxed-answer rule through the default scorer
    assert default_compute_score(row["data_source"], "so $x = \\boxed{2}$", "2") == 1.0
    assert default_compute_score(row["data_source"], "so $x = \\boxed{3}$", "2") == 0.0


def test_math500_style_jsonl_with_answers_test_only(tmp_path):
    src = tmp_path / "math500"
    src.mkdir()
    lines = [{"problem": "p1", "solution": "no box here", "answer": "7"}, {"problem": "p2", "answer": "\\pi"}]
    (src / "test.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    written = convert_math_dir(src, tmp_path / "out")
    assert list(written) == ["test"]  # no train split: skipped
    rows = pq.read_table(tmp_path / "out" / "test.parquet").to_pylist()
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["7", "\\pi"]


def test_a_record_without_an_answer_names_its_line(tmp_path):
    src = tmp_path / "bad"
    src.mkdir()
    (src / "test.jsonl").write_text(json.dumps({"problem": "p", "solution": "no boxed answer"}) + "\n")
    with pytest.raises(ValueError, match=r"test\.jsonl: line 1: the solution has no \\boxed"):
        convert_math_dir(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_script(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--input_dir", str(_original_release(tmp_path / "MATH")), "--local_dir",
         str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "test:" in out.stdout and (tmp_path / "out" / "train.parquet").exists()
    missing = subprocess.run(
        [sys.executable, str(SCRIPT), "--input_dir", str(tmp_path / "nothing"), "--local_dir", str(tmp_path / "o2")],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert missing.returncode == 1 and "no MATH test split" in missing.stderr
