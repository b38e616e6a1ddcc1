"""Batch generation (main_generation) and offline scoring of its file (main_eval data.path=...), as in public verl."""

import os
import subprocess

import pyarrow.parquet as pq
import pytest

from verl.trainer.main_eval import evaluate_model, score_generations
from verl.trainer.main_generation import main as generate
from verl.utils.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "builtin://arithmetic/test?test_size=12"


def _generate(tmp_path, name: str, *args: str) -> list[dict]:
    out = tmp_path / f"{name}.parquet"
    generate([f"data.path={DATA}", f"data.output_path={out}", "rollout.response_length=24", *args])
    return pq.read_table(out).to_pylist()


def test_n_samples_per_row_with_the_input_columns_kept(tmp_path):
    rows = _generate(tmp_path, "gen", "data.n_samples=3")
    assert len(rows) == 12
    assert all(len(r["responses"]) == 3 and all(isinstance(t, str) for t in r["responses"]) for r in rows)
    assert {"data_source", "prompt", "reward_model", "responses"} <= set(rows[0])
    assert rows[0]["reward_model"]["ground_truth"]  # the ground truth travels with the responses


def test_same_seed_same_file_whatever_the_batch_size(tmp_path):
    # determinism on CPU: each response's randomness is keyed by (seed, row, sample), not by the batch it ran in
    a = _generate(tmp_path, "a", "data.n_samples=2", "data.batch_size=12", "seed=3")
    b = _generate(tmp_path, "b", "data.n_samples=2", "data.batch_size=5", "seed=3")
    c = _generate(tmp_path, "c", "data.n_samples=2", "data.batch_size=12", "seed=4")
    assert [r["responses"] for r in a] == [r["responses"] for r in b]
    assert [r["responses"] for r in a] != [r["responses"] for r in c]


def test_greedy_file_scores_as_the_model_evaluation_does(tmp_path):
    # two paths to one number: greedy generation scored offline equals main_eval's greedy accuracy of the model
    _generate(tmp_path, "greedy", "rollout.do_sample=false", "rollout.response_length=32")
    offline = score_generations(str(tmp_path / "greedy.parquet"))
    direct = evaluate_model("builtin://tiny-qwen2-arith-sft", DATA, max_new_tokens=32)
    assert offline["num_rows"] == direct["num_samples"] == 12
    assert offline["test_score/arithmetic"] == pytest.approx(direct["acc"])
    assert offline["pass@n/arithmetic"] == pytest.approx(direct["acc"])


def test_a_failing_scorer_is_counted_not_fatal(tmp_path):
    _generate(tmp_path, "gen", "data.n_samples=2")
    calls = []

    def flaky(data_source, solution_str, ground_truth, extra_info=None):
        calls.append(solution_str)
        if len(calls) % 3 == 0:
            raise RuntimeError("sandbox timed out")
        return 1.0

    result = score_generations(str(tmp_path / "gen.parquet"), compute_score=flaky)
    assert result["num_responses"] == 24 and result["errors"] == 8
    assert "sandbox timed out" in result["first_error"] and "row" in result["first_error"]
    assert 0.0 < result["test_score/arithmetic"] < 1.0


def test_bad_settings_and_files_name_the_key_or_row(tmp_path):
    with pytest.raises(ConfigError, match="data.n_samples=2 with greedy"):
        _generate(tmp_path, "x", "data.n_samples=2", "rollout.temperature=0")
    with pytest.raises(ValueError, match=r"row 0: the prompt has \d+ tokens, more than rollout.prompt_length=4"):
        _generate(tmp_path, "x", "rollout.prompt_length=4")
    pq.write_table(pq.read_table(_write_plain(tmp_path)), tmp_path / "plain.parquet")
    with pytest.raises(KeyError, match="has no column 'responses'"):
        score_generations(str(tmp_path / "plain.parquet"))


def _write_plain(tmp_path) -> str:
    from verl.data.tasks import resolve_data_files

    return resolve_data_files(DATA)


@pytest.mark.slow
def test_generate_and_score_example(tmp_path):
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "examples", "generation", "run_generate_and_score.sh"), "data.path=" + DATA],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": ROOT, "OUT": str(tmp_path)},
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "wrote 48 responses to 12 prompts (4 each)" in out.stdout
    assert "test_score/arithmetic" in out.stdout and "pass@n/arithmetic" in out.stdout
    assert (tmp_path / "arithmetic-test-gen.parquet").exists()
