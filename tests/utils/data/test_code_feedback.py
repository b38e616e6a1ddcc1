"""CodeFeedbackDataset and examples/data_preprocess/code_cleaner.py: convert, drop by reason, scale, save parquet."""

import importlib.util
import json
import os

import pyarrow.parquet as pq
import pytest

from verl.sandbox import bwrap_status
from verl.utils.data import CodeFeedbackDataset, detect_format

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ADD_IO = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
ROWS = [
    {"question": "Sum two ints.", "input_output": ADD_IO, "solutions": json.dumps(["print(sum(map(int, input().split())))"]), "score": 4},
    {"question": "Sum  two ints.", "input_output": ADD_IO, "solutions": "[]", "score": 5},  # duplicate (whitespace)
    {"question": "Broken reference.", "input_output": ADD_IO, "solutions": json.dumps(["print(4)"]), "score": 2},
    {"question": "Bad syntax.", "input_output": ADD_IO, "solutions": json.dumps(["print(("]), "score": 1},
    {"text": "Reverse.", "code": "def rev(x):\n    return x[::-1]", "test_list": ["assert rev([1, 2]) == [2, 1]"], "rating": 3},
    {"question": "A very long problem. " * 200, "input_output": ADD_IO, "solutions": "[]"},
    {"title": "no format"},
]  # fmt: skip


def write_jsonl(tmp_path, rows):
    path = tmp_path / "raw.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_formats_are_detected_and_unknown_ones_named():
    assert [detect_format(r) for r in ROWS[:1] + ROWS[4:5]] == ["apps", "mbpp"]
    with pytest.raises(ValueError, match=r"unknown code-data format \(fields \['title'\]\)"):
        detect_format(ROWS[-1])


def test_process_drops_by_reason_scales_and_saves(tmp_path):
    data = CodeFeedbackDataset.load_from_json(write_jsonl(tmp_path, ROWS))
    out = data.process(max_seq_length=512, tokenizer_path="builtin://tiny-qwen2", reward_scaling=True)
    assert out.stats["dropped"] == {"unconvertible": 1, "duplicate": 1, "too_long": 1} and out.stats["kept"] == 4
    scaled = {r["prompt"][0]["content"].split("\n")[0]: r["extra_info"]["scaled_score"] for r in out.rows}
    assert (
        scaled["Sum two ints."] == 1.0
        and scaled["Bad syntax."] == -1.0
        and scaled["Broken reference."] == pytest.approx(-1 / 3)
    )
    written = out.save(str(tmp_path / "clean"), test_fraction=0.25)
    train, test = pq.read_table(written["train"]).to_pylist(), pq.read_table(written["test"]).to_pylist()
    assert len(train) == 3 and len(test) == 1 and {r["extra_info"]["split"] for r in test} == {"test"}
    assert json.loads((tmp_path / "clean" / "stats.json").read_text())["kept"] == 4


def test_a_line_that_is_not_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: not valid JSON"):
        CodeFeedbackDataset.load_from_json(str(path))


@pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
def test_code_cleaner_example_validates_references_in_the_sandbox(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "code_cleaner", os.path.join(ROOT, "examples", "data_preprocess", "code_cleaner.py")
    )
    cleaner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cleaner)
    stats = cleaner.main(["--input", write_jsonl(tmp_path, ROWS[:6]), "--output", str(tmp_path / "out"), "--validate"])
    assert stats["dropped"] == {
        "duplicate": 1,
        "reference_fails_tests": 1,
        "reference_syntax_error": 1,
        "no_reference": 1,
    }
    kept = pq.read_table(str(tmp_path / "out" / "train.parquet")).to_pylist()
    assert sorted(r["data_source"] for r in kept) == ["apps", "mbpp"]


@pytest.mark.slow
@pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
def test_code_gen_grpo_config_trains_on_cleaned_code_data(tmp_path):
    """The guide's config (mapped keys) loads, and one GRPO step runs on code_cleaner output with rewards from the
    sandbox; the tiny model and small sizes replace the 7B model's, the rest is the file."""
    import subprocess
    import sys

    CodeFeedbackDataset.load_from_json(write_jsonl(tmp_path, ROWS[:1] + ROWS[4:5])).process().save(str(tmp_path / "d"))
    train = str(tmp_path / "d" / "train.parquet")
    args = [sys.executable, "-m", "verl.trainer.main_ppo", "--config",
            os.path.join(ROOT, "examples", "grpo_trainer", "config", "code_gen_grpo.yaml"),
            "actor_rollout_ref.model.path=builtin://tiny-qwen2", "actor_rollout_ref.model.dtype=fp32",
            "actor_rollout_ref.rollout.name=hf", f"data.train_files={train}", f"data.val_files={train}",
            "data.train_batch_size=2", "data.max_prompt_length=256", "data.max_response_length=16",
            "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "trainer.total_training_steps=1", "trainer.test_freq=-1", "trainer.save_freq=-1", "trainer.val_before_train=false",
            f"trainer.default_local_dir={tmp_path / 'run'}", "trainer.logger=[file]"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = next(m for m in metrics if "critic/score/mean" in m)
    assert step["step"] == 1 and "timing_s/reward" in step and step["reward/errors"] == 0
