"""scripts/verl_tests_report.py counts each upstream test file's results: passes, failures, and a file that cannot be
imported as one error per test it holds (its tests never ran)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_counts_passes_failures_and_import_errors(tmp_path):
    tests = tmp_path / "repo" / "tests" / "utils"
    tests.mkdir(parents=True)
    (tests / "test_ok_on_cpu.py").write_text(
        "from verl.protocol import DataProto\n\ndef test_a():\n    assert DataProto is not None\n\n"
        "def test_b():\n    assert 1 == 2\n"
    )
    (tests / "test_missing_on_cpu.py").write_text(
        "from verl.no_such_module import x\n\ndef test_c():\n    pass\n\ndef test_d():\n    pass\n"
    )
    (tests / "test_other.py").write_text("def test_not_selected():\n    pass\n")
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "verl_tests_report.py"),
            "--verl-repo",
            str(tmp_path / "repo"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["file"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"tests/utils/test_ok_on_cpu.py", "tests/utils/test_missing_on_cpu.py"}
    ok, missing = rows["tests/utils/test_ok_on_cpu.py"], rows["tests/utils/test_missing_on_cpu.py"]
    assert (ok["passed"], ok["failed"], ok["errors"]) == (1, 1, 0)
    assert (missing["passed"], missing["errors"]) == (0, 2)
    assert "**1** of 4 (25.0%)" in proc.stdout


@pytest.mark.slow
def test_helper_modules_beside_a_test_are_copied_and_async_tests_run(tmp_path):
    """A test that loads a helper module kept beside it (as verl's test_import_utils_on_cpu.py does) finds it in the
    scratch copy, and an unmarked ``async def`` test runs (verl's CI uses ``--asyncio-mode=auto``)."""
    tests = tmp_path / "repo" / "tests" / "utils"
    tests.mkdir(parents=True)
    (tests / "_helper_module.py").write_text("VALUE = 42\n")
    (tests / "test_helper_on_cpu.py").write_text(
        "import os\n\nfrom verl.utils.import_utils import load_extern_object\n\n"
        "def test_loads_the_helper():\n"
        "    path = os.path.join(os.path.dirname(__file__), '_helper_module.py')\n"
        "    assert load_extern_object(path, 'VALUE') == 42\n\n"
        "async def test_async():\n    assert True\n"
    )
    out = tmp_path / "report.json"
    script = os.path.join(ROOT, "scripts", "verl_tests_report.py")
    proc = subprocess.run(
        [sys.executable, script, "--verl-repo", str(tmp_path / "repo"), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["passed"], row["failed"], row["errors"], row["skipped"]) == (2, 0, 0, 0), row
