"""scripts/verl_tests_report.py counts each upstream test file's results: passes, failures, and a file that cannot be
imported as one error per test it holds (its tests never ran)."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
