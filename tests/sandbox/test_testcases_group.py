"""Several programs against the same test cases in one sandbox run (a prompt's rollout.n answers): the verdicts
equal one run per program, and no program can change a sibling's verdict (its processes, files, /tmp, the harness's
memory and output are out of reach; killing the harness costs only itself)."""

import pytest

from verl.sandbox import bwrap_status
from verl.sandbox.testcases import run_test_cases, run_test_cases_many

pytestmark = pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")

CASES = {"fn_name": "f", "inputs": [[1], [2], [3]], "outputs": [8, 10, 12]}  # f(x) = (x + 3) * 2
GOOD = "def f(x):\n    return (x + 3) * 2\n"
STDIN_CASES = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3", "7"]}


def statuses(run):
    return [c.status for c in run.cases]


def test_a_group_gives_the_verdicts_of_one_run_per_program():
    programs = [
        GOOD,
        "def f(x):\n    return x\n",  # wrong
        "def f(:\n",  # does not compile
        "def f(x):\n    return 1 / (x - 2)\n",  # right for no case, crashes on one
        "def f(x):\n    return (x + 3) * 2 if x < 3 else 0\n",  # right for two of three
        "import sys\nsys.exit(0)\n",  # exits before the function is defined
    ]
    together = run_test_cases_many(programs, CASES, case_timeout_s=2)
    alone = [run_test_cases(p, CASES, case_timeout_s=2) for p in programs]
    assert [statuses(r) for r in together] == [statuses(r) for r in alone]
    assert [r.pass_rate for r in together] == [1.0, 0.0, 0.0, 0.0, 2 / 3, 0.0]
    assert together[2].compile_error and together[3].cases[1].status == "runtime_error"
    stdin_programs = ["a, b = map(int, input().split())\nprint(a + b)", "print(3)"]
    assert [r.pass_rate for r in run_test_cases_many(stdin_programs, STDIN_CASES)] == [1.0, 0.5]


@pytest.mark.slow
@pytest.mark.parametrize(
    "attack",
    [
        # a daemon that outlives the program and kills whatever runs next (sparing the harness, whose death would
        # end the run and charge this program)
        "import os, time, signal\nharness = os.getppid()\nif os.fork() == 0:\n    os.setsid()\n    while True:\n"
        "        for p in os.listdir('/proc'):\n            if p.isdigit() and int(p) not in (1, harness, os.getpid()):\n"
        "                try: os.kill(int(p), signal.SIGKILL)\n                except OSError: pass\n"
        "        time.sleep(0.001)\ndef f(x):\n    return 0\n",
        # leave a sibling-facing message in /tmp and in the working directory's parent
        "open('/tmp/answer', 'w').write('0')\nopen('../shared', 'w').write('0')\ndef f(x):\n    return 0\n",
        # read or write the harness's memory and output through /proc (it is not dumpable: refused)
        "import os\nfor name in ('mem', 'fd/1', 'environ'):\n    try:\n        open(f'/proc/{os.getppid()}/' + name, 'r+b')\n"
        "        raise SystemExit('opened ' + name)\n    except PermissionError:\n        pass\n"
        "def f(x):\n    return (x + 3) * 2\n",
        # kill the harness mid-run: this program is charged, the ones after it run in a fresh sandbox
        "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return (x + 3) * 2\n",
        # loop past its own budget: the next program still gets its full time
        "def f(x):\n    while True:\n        pass\n",
    ],
)
def test_no_program_changes_a_siblings_verdict(attack):
    # a sibling that reads /tmp/answer would fail if the attacker's file were still there
    reader = "import os\ndef f(x):\n    assert not os.path.exists('/tmp/answer')\n    return (x + 3) * 2\n"
    runs = run_test_cases_many([GOOD, attack, GOOD, reader, GOOD], CASES, case_timeout_s=1, sample_timeout_s=2)
    assert [r.all_passed for r in runs][2:] == [True, True, True]
    assert runs[0].all_passed
    if "getppid(), signal.SIGKILL" in attack:
        assert runs[1].pass_rate == 0.0 and runs[1].sandbox_status == "sandbox_error"
    if "opened" in attack:
        assert runs[1].all_passed  # every /proc door was shut, so it went on to answer
    if "while True:\n        pass" in attack:
        assert statuses(runs[1])[0] == "timeout" and runs[1].sandbox_status == "timeout"


def test_programs_cannot_read_each_others_source():
    spy = "import os\nprint(sorted(os.listdir('..')) + sorted(os.listdir('.')))\n"
    run = run_test_cases_many(["# SECRET\n" + GOOD, spy], {"inputs": [""], "outputs": ["x"]})[1]
    assert "main_0.py" not in run.cases[0].stdout and "SECRET" not in run.cases[0].stdout


def test_without_namespaces_a_group_leaves_the_hosts_processes_alone():
    """isolation=rlimit (no PID namespace): the harness kills only its own session's leftovers between programs,
    never the host's processes, and the verdicts are the same."""
    import subprocess

    from verl.sandbox import SandboxConfig

    bystander = subprocess.Popen(["sleep", "30"])  # a host process, in this test's session
    try:
        daemon = "import os, time\nif os.fork() == 0:\n    time.sleep(30)\ndef f(x):\n    return (x + 3) * 2\n"
        runs = run_test_cases_many([daemon, GOOD], CASES, config=SandboxConfig(isolation="rlimit"))
        assert [r.all_passed for r in runs] == [True, True]
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
