"""Converters from APPS/TACO, HumanEval, MBPP and LeetCode-style rows to verl rows; each reference solution passes
its own converted tests in the sandbox, and a wrong one does not."""

import json

import pytest

from verl.sandbox import bwrap_status
from verl.utils.data import assert_cases, from_apps, from_humaneval, from_leetcode, from_mbpp
from verl.utils.reward_score import default_compute_score

APPS = {
    "problem_id": 7,
    "question": "Read two integers and print their sum.",
    "input_output": json.dumps({"inputs": ["1 2\n", "5 6\n"], "outputs": ["3\n", "11\n"]}),
    "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)"]),
    "starter_code": "",
}
HUMANEVAL = {
    "task_id": "HumanEval/0",
    "entry_point": "add",
    "prompt": 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
    "    assert abs(candidate(0.5, 0.25) - 0.75) < 1e-6\n",
}
MBPP = {
    "task_id": 2,
    "text": "Write a function to reverse a list.",
    "code": "def rev(xs):\n    return xs[::-1]",
    "test_list": ["assert rev([1, 2, 3]) == [3, 2, 1]", "assert rev([]) == []"],
}
LEETCODE = {"question_id": 1, "question": "Return the indices of the two numbers adding up to target.",
            "entry_point": "twoSum", "starter_code": "class Solution:\n    def twoSum(self, nums, target):\n",
            "solution": "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
                        "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
                        "                return [seen[target - x], i]\n            seen[x] = i\n",
            "tests": [{"input": [[2, 7, 11, 15], 9], "output": [0, 1]}, {"input": [[3, 2, 4], 6], "output": [1, 2]}]}  # fmt: skip


def test_assert_lines_become_function_call_cases():
    cases, skipped = assert_cases("assert f(1, [2]) == {'a': 3}\nassert 4 == f(5, [])\nassert f(1)\nassert g(1) == 2")
    assert cases == {"fn_name": "f", "inputs": [[1, [2]], [5, []]], "outputs": [{"a": 3}, 4]} and skipped == 2
    assert assert_cases("assert f(x) == 1") == (None, 1)  # a non-literal argument
    with pytest.raises(ValueError, match="does not parse"):
        assert_cases("assert (")


def test_each_format_converts():
    apps = from_apps(APPS)
    assert apps["data_source"] == "apps" and apps["ability"] == "code" and apps["extra_info"]["source_id"] == "7"
    assert json.loads(apps["reward_model"]["ground_truth"])["outputs"] == ["3\n", "11\n"]
    he = from_humaneval(HUMANEVAL)
    he_cases = json.loads(he["reward_model"]["ground_truth"])
    assert he_cases == {"fn_name": "add", "inputs": [[1, 2], [-1, 1]], "outputs": [3, 0]}
    assert he["extra_info"]["unconverted_asserts"] == 1 and "def add(a: int" in he["prompt"][0]["content"]
    mbpp = from_mbpp(MBPP)
    assert json.loads(mbpp["reward_model"]["ground_truth"])["fn_name"] == "rev"
    assert "assert rev([1, 2, 3])" in mbpp["prompt"][0]["content"]
    lc = from_leetcode(LEETCODE)
    assert json.loads(lc["reward_model"]["ground_truth"])["inputs"][1] == [[3, 2, 4], 6]


def test_bad_rows_name_what_is_missing():
    with pytest.raises(ValueError, match=r"missing \['input_output'\]"):
        from_apps({"question": "q"})
    with pytest.raises(ValueError, match="none of the 1 asserts"):
        from_mbpp({"text": "t", "test_list": ["assert f(x)"]})
    with pytest.raises(ValueError, match="no test cases"):
        from_apps({"question": "q", "input_output": json.dumps({"inputs": [], "outputs": []})})


@pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")
@pytest.mark.parametrize("row", [from_apps(APPS), from_humaneval(HUMANEVAL), from_mbpp(MBPP), from_leetcode(LEETCODE)])
def test_reference_solutions_pass_their_converted_tests(row):
    truth = row["reward_model"]["ground_truth"]
    reference = row["extra_info"]["reference_solution"]
    assert default_compute_score(row["data_source"], reference, truth)["score"] == 1.0
    assert default_compute_score(row["data_source"], "print('wrong')", truth)["score"] == 0.0
