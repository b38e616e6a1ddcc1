"""Each Python-API example (one per snippet of docs/python_api.md) runs for a step or two and prints what it
promises."""

from __future__ import annotations

import os
import re

import pytest
from example_runner import run_example_script

TINY = ["--max-steps", "1", "--eval-interval", "1", "--rollout-batch-size", "2", "--responses-per-prompt", "2"]
TINY += ["--num-rollout-steps", "1", "--val-size", "4"]


def run_example(name: str, *args: str) -> str:
    return run_example_script(os.path.join("examples", "python_api", name), *args, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, expected",
    [
        ("ppo_trainer_optuna_objective.py", r"objective\(\{'kl_coef': 0.05.*\}\) = eval/reward_mean \d\.\d{4}"),
        ("evaluators_weighted_score.py", r"eval/toxicity_mean: \d\.\d{4}\neval/latency_p50: .*weighted score: -?\d"),
        ("step_callbacks.py", r"step 1: kl_filtered_frac=0\.0000 gamma=0\.9[09]0 kl_max=0\.0000\n.*stopped early: "),
    ],
)
def test_ppo_trainer_examples(tmp_path, name, expected):
    stdout = run_example(name, *TINY, "--out-dir", str(tmp_path))
    assert re.search(expected, stdout, re.S), stdout[-2000:]
    assert (tmp_path / "metrics.jsonl").exists() and (tmp_path / "global_step_1" / "actor").is_dir()


@pytest.mark.slow
def test_data_parallel_trainer_example(tmp_path):
    stdout = run_example("data_parallel_trainer.py", "--work-dir", str(tmp_path), "--max-steps", "2")
    assert len(re.findall(r"^Loss: -?\d+\.\d{4}, Reward: -?\d+\.\d{4}$", stdout, re.M)) == 2, stdout[-2000:]
    logs = tmp_path / "logs"
    (log_file,) = [f for f in os.listdir(logs) if f.endswith(".log")]
    assert re.fullmatch(r"verl-\d{8}-\d{6}\.log", log_file)
    assert "step 2: loss=" in (logs / log_file).read_text()
    assert (tmp_path / "data.jsonl").exists()
    assert re.search(r"checkpoint: .*global_step_2", stdout)
