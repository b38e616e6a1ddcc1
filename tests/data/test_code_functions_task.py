"""The built-in code task: every specification kind renders, its reference program passes its own hidden tests in
the sandbox (the semantics are written twice: as the program and as reference_value), a wrong one does not, and the
split is by problem and deterministic."""

import json

import pytest

from verl.data.tasks import TASKS, generate_task_rows, problem_key
from verl.data.tasks.code_functions import KINDS, _problems, hidden_tests
from verl.sandbox import bwrap_status
from verl.utils.reward_score import default_compute_score


@pytest.mark.slow
def test_space_rows_and_split():
    assert len(_problems(TASKS["code_functions"].normalize_params({}))) == 8346
    train = generate_task_rows("code_functions", "train", 4000, seed=0)
    answers = [r["extra_info"]["answer"] for r in train]
    kinds = {"arith": sum("(x " in a for a in answers), "extreme": sum("max(" in a or "min(" in a for a in answers)}
    assert kinds["arith"] < 3850 and kinds["extreme"] > 90  # kind first: nearly every problem of the small kinds is in
    test = generate_task_rows("code_functions", "test", 40, seed=0)
    assert not {problem_key("code_functions", r) for r in train} & {problem_key("code_functions", r) for r in test}
    assert generate_task_rows("code_functions", "test", 40, seed=0) == test  # deterministic
    row = train[0]
    assert row["data_source"] == "code_functions" and row["ability"] == "code"
    assert (
        row["extra_info"]["answer"].startswith("```python\ndef f(") and "```python block" in row["prompt"][0]["content"]
    )
    cases = json.loads(row["reward_model"]["ground_truth"])
    assert cases["fn_name"] == "f" and len(cases["inputs"]) == len(cases["outputs"]) == 5
    assert hidden_tests(("count", "even", 0)) == hidden_tests(("count", "even", 0))
    with pytest.raises(ValueError, match="kinds must be a comma-separated subset"):
        generate_task_rows("code_functions", "train", 1, kinds="sort")


@pytest.mark.slow
@pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
@pytest.mark.parametrize("kind", KINDS)
def test_reference_programs_pass_their_hidden_tests_and_wrong_ones_fail(kind):
    rows = generate_task_rows("code_functions", "train", 6, seed=1, kinds=kind)
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        assert default_compute_score("code_functions", row["extra_info"]["answer"], truth)["score"] == 1.0, row
        wrong = row["extra_info"]["answer"].replace("return ", "return 1 + ")
        assert default_compute_score("code_functions", wrong, truth)["score"] < 1.0
