"""scripts/compare_runs.py: equal runs compare IDENTICAL whatever their timings; any other difference is named."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "compare_runs.py")


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_timings_are_ignored_and_other_differences_named(tmp_path):
    base = [{"step": 0, "val-core/acc": 0.5, "time": 1.0}, {"step": 1, "actor/pg_loss": 0.1, "timing_s/gen": 2.0}]
    same = [{"step": 0, "val-core/acc": 0.5, "time": 9.0}, {"step": 1, "actor/pg_loss": 0.1, "timing_s/gen": 7.0}]
    a, b = _write(tmp_path / "a.jsonl", base), _write(tmp_path / "b.jsonl", same)
    ok = subprocess.run([sys.executable, SCRIPT, a, b], capture_output=True, text=True)
    assert ok.returncode == 0 and "IDENTICAL (2 records)" in ok.stdout
    other = [{"step": 0, "val-core/acc": 0.5}, {"step": 1, "actor/pg_loss": 0.10000001, "extra": 1}]
    c = _write(tmp_path / "c.jsonl", other)
    bad = subprocess.run([sys.executable, SCRIPT, a, c], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "step 1: actor/pg_loss 0.1 != 0.10000001" in bad.stdout and "step 1: extra only in the second" in bad.stdout
