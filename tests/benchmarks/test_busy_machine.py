"""benchmarks/busy_machine.py runs end to end in a tiny setting and reports every cell (not timed)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_JOB = [
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
]


def load():
    spec = importlib.util.spec_from_file_location("busy_machine", os.path.join(ROOT, "benchmarks", "busy_machine.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["busy_machine"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_busy_machine_tiny(tmp_path):
    bench = load()
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    out = bench.main(
        ["--reps", "1", "--steps", "3", "--steps-worst", "2", "--busy", "1", "--threads", "1", "--timeout", "300",
         "--work-dir", str(tmp_path / "w"), "--md", str(md), "--json", str(js), *TINY_JOB]
    )  # fmt: skip
    assert out["busy_levels"] == [0, 1]  # the quiet level is always measured: the ratios need it
    assert [(r["policy"], r["busy"]) for r in out["runs"]] == [("old", 0), ("new", 0), ("new", 1), ("old", 1)]
    assert [r["steps"] for r in out["runs"]] == [3, 3, 3, 2]  # the old policy beside the most busy loops: fewer steps
    for run in out["runs"]:
        assert run["step_s"] and run["median_s"] > 0 and not run["timed_out"]
        assert run["same_metrics"]  # one seed, one thread count: every policy and load computes the same numbers
    for policy in ("old", "new"):
        assert out["cells"][policy][0]["x_quiet"] == 1.0 and out["cells"][policy][1]["x_quiet"] > 0
    table = md.read_text()
    assert "| old: libgomp's default spin" in table and "Quiet, the new policy against the old" in table
    assert "2 of 4 runs" not in table and "4 of 4 runs identical" in table
    assert json.loads(js.read_text())["cells"]["new"]["1"]["median_s"] > 0


def test_each_side_chooses_its_own_variables(monkeypatch):
    bench = load()
    monkeypatch.setenv("GOMP_SPINCOUNT", "5")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    old, new = bench.job_env("old", None), bench.job_env("new", None)
    assert old["VERL_THREAD_POLICY"] == "off" and "VERL_THREAD_POLICY" not in new
    assert not {"GOMP_SPINCOUNT", "OMP_NUM_THREADS"} & (set(old) | set(new))  # a fresh shell's, on both sides
    assert bench.job_env("new", 2)["OMP_NUM_THREADS"] == "2"
