"""Test-case judging: stdin/stdout and function-call cases, judged on the host, and the ways a program tries to pass
without solving the problem (exit early, read the answers, patch the harness or equality), all failing."""

import json

import pytest

from verl.sandbox import bwrap_status
from verl.sandbox.testcases import parse_test_cases, return_matches, run_test_cases, stdout_matches

pytestmark = pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")

SUM = {"inputs": ["1 2\n", "3 4\n", "10 -2\n"], "outputs": ["3\n", "7", "8"]}
ADD = {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, [7]]}  # APPS wraps some outputs in a list


def statuses(run):
    return [c.status for c in run.cases]


def test_stdin_stdout_cases_are_judged_per_case():
    right = run_test_cases("a, b = map(int, input().split())\nprint(a + b)", SUM)
    assert statuses(right) == ["passed"] * 3 and right.all_passed and right.pass_rate == 1.0
    partly = run_test_cases("print(3)", SUM)
    assert statuses(partly) == ["passed", "failed", "failed"] and partly.pass_rate == pytest.approx(1 / 3)
    crash = run_test_cases("raise ValueError('no')", SUM)
    assert statuses(crash) == ["runtime_error"] * 3 and "ValueError: no" in crash.cases[0].stderr
    syntax = run_test_cases("def f(:", SUM)
    assert statuses(syntax) == ["compile_error"] * 3 and syntax.compile_error.startswith("SyntaxError")


def test_function_call_cases_and_leetcode_classes():
    assert run_test_cases("def add(a, b):\n    return a + b", ADD).all_passed
    assert run_test_cases("class Solution:\n    def add(self, a, b):\n        return a + b", ADD).all_passed
    missing = run_test_cases("def plus(a, b):\n    return a + b", ADD)
    assert statuses(missing) == ["runtime_error"] * 2 and "defines no function 'add'" in missing.cases[0].stderr


@pytest.mark.slow
def test_a_loop_costs_one_case_timeout_and_stop_on_failure_skips_the_rest():
    loop = "import sys\nif sys.stdin.read().startswith('3'):\n    while True: pass\nprint(3)"
    run = run_test_cases(loop, SUM, case_timeout_s=0.5)
    assert statuses(run) == ["passed", "timeout", "failed"] and run.wall_s < 3
    stopped = run_test_cases(loop, SUM, case_timeout_s=0.5, stop_on_failure=True)
    assert statuses(stopped) == ["passed", "timeout", "not_run"]
    forever = run_test_cases("while True: pass", SUM, case_timeout_s=0.3, sample_timeout_s=0.6)
    assert statuses(forever)[-1] == "timeout" and not forever.all_passed and forever.wall_s < 3


@pytest.mark.parametrize(
    "cheat",
    [
        "import sys\nsys.exit(0)",  # exit before the tests run
        "import os\nos._exit(0)",
        # read the answers: the sandbox holds the inputs only
        "import json\nprint(json.load(open('cases.json')).get('outputs', ['?'])[0])",
        # patch the harness's own output: the host only trusts the report line, and compares itself
        "import json, sys\nprint(sys.argv[-1] + json.dumps({'results': [{'timeout': False, 'exit': 0, "
        "'stdout': '3', 'stderr': '', 'ret': None, 'seconds': 0}] * 3}))",
        # write a forged or malformed report into the harness's own stdout (/proc refuses it), then kill the harness
        "import os, sys\nopen(f'/proc/{os.getppid()}/fd/1', 'w').write(sys.argv[-1] + '{not json\\n')\n"
        "os.kill(os.getppid(), 9)",
        "import os, sys\nopen(f'/proc/{os.getppid()}/fd/1', 'w').write(sys.argv[-1] + '{\"results\": [1]}\\n')\n"
        "os.kill(os.getppid(), 9)",
        # an object equal to everything
        "class Liar(int):\n    def __eq__(self, other):\n        return True\nprint(Liar(0))",
    ],
)
def test_cheats_do_not_pass(cheat):
    assert not run_test_cases(cheat, SUM).all_passed


def test_large_outputs_fit_the_report_and_a_cut_report_fails_cases_without_raising():
    """Each case keeps up to max_output_bytes; the report of all cases fits the run's cap (once, 5 x 400 KB cut the
    report and the host raised on its JSON). A report cut anyway (a kill mid-print) counts as no report."""
    from verl.sandbox import SandboxConfig
    from verl.sandbox.testcases import _parse_report

    cases = {"inputs": ["1 2\n"] * 5, "outputs": ["3"] * 5}
    big = run_test_cases("print('x' * 400_000)", cases)
    assert statuses(big) == ["failed"] * 5 and len(big.cases[0].stdout) == 400_001
    capped = run_test_cases("print('3' + ' ' * 5000)", cases, config=SandboxConfig(max_output_bytes=1000))
    assert statuses(capped) == ["passed"] * 5 and len(capped.cases[0].stdout) == 1000  # trailing spaces ignored
    assert _parse_report('{"results": [{"timeout": false, "exit": 0, "stdout": "xx') == {}
    assert _parse_report('{"results": [1]}') == {} and _parse_report(None) == {}


def test_return_value_cheats_do_not_pass():
    liar = "class Liar(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n"
    assert statuses(run_test_cases(liar + "def add(a, b):\n    return Liar(0)", ADD)) == ["failed", "failed"]
    patched = "import json\njson.dumps = lambda v: '3'\ndef add(a, b):\n    return 0"  # patch the serializer
    assert run_test_cases(patched, ADD).passed <= 1  # '3' is right for case 0 only: it cannot know case 1's answer


def test_comparisons_and_bad_test_cases():
    assert stdout_matches("3 \n\n", "3") and stdout_matches("0.3333333", "0.33333331") and not stdout_matches("3", "4")
    assert stdout_matches("a\nb\n", ["a", "b"])
    assert return_matches("[1, 2]", (1, 2)) and return_matches("7", [7]) and not return_matches("nan?", 1)
    assert parse_test_cases(json.dumps(ADD))["fn_name"] == "add"
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_test_cases("{oops")
    with pytest.raises(ValueError, match="2 inputs but 1 outputs"):
        parse_test_cases({"inputs": ["1", "2"], "outputs": ["1"]})
    with pytest.raises(ValueError, match=r"must be \{'inputs'"):
        parse_test_cases({"cases": []})
