"""The guide's weighted syntax + logic reward, against hand-computed values."""

import json

import pytest

from verl.sandbox import SandboxResult, bwrap_status
from verl.sandbox.testcases import CaseResult, TestRun
from verl.utils.reward_score.code_reward import check_syntax, compute_reward, compute_score, evaluate_logic


def test_weights_and_penalty_by_hand():
    half = TestRun(cases=[CaseResult("passed"), CaseResult("failed")])
    assert compute_reward("print(1)", half) == pytest.approx(0.6 * 1 + 0.4 * 0.5)
    assert compute_reward("print(1)", half, syntax_weight=0.2, logic_weight=0.8) == pytest.approx(0.2 + 0.4)
    assert compute_reward("def f(:", 0.0) == 0.0 and compute_reward("def f(:", 0.0, syntax_penalty=-0.5) == -0.5
    assert check_syntax("(" * 10000) == 0.0 and check_syntax("x = 1") == 1.0


def test_every_execution_result_kind():
    assert evaluate_logic({"passed": 3, "total": 4}) == 0.75 and evaluate_logic({"pass_rate": 0.2}) == 0.2
    assert evaluate_logic(SandboxResult("ok", 0, "", "", 0.1, "bwrap")) == 1.0
    assert evaluate_logic(SandboxResult("timeout", None, "", "", 1, "bwrap")) == 0.0 and evaluate_logic(1) == 1.0
    with pytest.raises(ValueError, match="needs 'pass_rate' or 'passed' and 'total'"):
        evaluate_logic({"ok": True})
    with pytest.raises(TypeError, match="must be a TestRun"):
        evaluate_logic("passed")


@pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
def test_as_a_reward_function_it_runs_the_tests():
    cases = json.dumps({"inputs": ["1 2\n", "2 2\n"], "outputs": ["3", "4"]})
    out = compute_score("apps", "```python\nprint(3)\n```", cases)
    assert out == {"score": pytest.approx(0.6 + 0.4 * 0.5), "syntax": 1.0, "logic": 0.5, "pass_rate": 0.5}
    assert compute_score("apps", "```python\nprint(3\n```", cases, syntax_penalty=-0.5)["score"] == -0.5
