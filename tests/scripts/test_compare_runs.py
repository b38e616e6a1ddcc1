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


def test_new_metrics_can_be_allowed_while_shared_ones_must_match(tmp_path):
    base = [{"step": 1, "actor/pg_loss": 0.1}]
    a = _write(tmp_path / "a.jsonl", base)
    added = _write(tmp_path / "b.jsonl", [{"step": 1, "actor/pg_loss": 0.1, "rollout_corr/kl": 0.0}])
    strict = subprocess.run([sys.executable, SCRIPT, a, added], capture_output=True, text=True)
    assert strict.returncode == 1 and "rollout_corr/kl only in the second" in strict.stdout
    ok = subprocess.run([sys.executable, SCRIPT, a, added, "--allow-new-metrics"], capture_output=True, text=True)
    assert ok.returncode == 0 and "1 metrics only in the second run: rollout_corr/kl" in ok.stdout
    assert "IDENTICAL (1 records)" in ok.stdout
    changed = _write(tmp_path / "c.jsonl", [{"step": 1, "actor/pg_loss": 0.2, "rollout_corr/kl": 0.0}])
    bad = subprocess.run([sys.executable, SCRIPT, a, changed, "--allow-new-metrics"], capture_output=True, text=True)
    assert bad.returncode == 1 and "actor/pg_loss 0.1 != 0.2" in bad.stdout
    dropped = subprocess.run([sys.executable, SCRIPT, added, a, "--allow-new-metrics"], capture_output=True, text=True)
    assert dropped.returncode == 1 and "rollout_corr/kl only in the first" in dropped.stdout  # a lost metric counts
