"""Code-generation metrics against hand-computed values, and examples/evaluation/code_generation_eval.py end to end."""

import importlib.util
import json
import os

import pytest

from verl.sandbox import bwrap_status
from verl.utils.reward_score.code_eval import evaluate_code_responses, pass_at_k

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
needs_bwrap = pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
CASES = json.dumps({"inputs": ["1 2\n", "2 2\n"], "outputs": ["3", "4"]})


def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 4, 2) == 1.0 and pass_at_k(3, 0, 3) == 0.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)


@needs_bwrap
def test_metrics_over_samples_by_hand():
    row = {"reward_model": {"ground_truth": CASES}, "extra_info": {"source_id": "p1"}}
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    out = evaluate_code_responses([row], [[right, "print(3)", "def f(:"]], ks=(1, 2))
    assert out["syntax_rate"] == pytest.approx(2 / 3) and out["execution_success_rate"] == pytest.approx(2 / 3)
    assert out["case_pass_rate"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert out["pass@1"] == pytest.approx(1 / 3) and out["pass@2"] == pytest.approx(1 - 1 / 3)
    assert out["per_problem"] == [{"source_id": "p1", "n": 3, "correct": 1, "pass@1": pytest.approx(1 / 3),
                                   "pass@2": pytest.approx(2 / 3)}]  # fmt: skip


@needs_bwrap
def test_eval_script_runs_on_a_model_directory(tmp_path):
    rows = [{"question": "Print the sum of two integers.", "input_output": CASES, "solutions": "[]"},
            {"text": "Reverse a list.", "test_list": ["assert rev([1, 2]) == [2, 1]"]}]  # fmt: skip
    test_set = tmp_path / "tests.jsonl"
    test_set.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = importlib.util.spec_from_file_location(
        "code_generation_eval", os.path.join(ROOT, "examples", "evaluation", "code_generation_eval.py")
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "eval.json"
    result = script.main(["--model_path", "builtin://tiny-qwen2", "--test_set", str(test_set), "--output", str(out),
                          "--n", "2", "--k", "1,2", "--max_new_tokens", "16", "--max_prompt_length", "512"])  # fmt: skip
    saved = json.loads(out.read_text())
    assert saved["num_problems"] == 2 and saved["num_samples"] == 4 and saved["n"] == 2 and saved["k"] == [1, 2]
    for key in ("syntax_rate", "execution_success_rate", "case_pass_rate", "pass@1", "pass@2"):
        assert 0.0 <= saved[key] <= 1.0 and saved[key] == result[key]
