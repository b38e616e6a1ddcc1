"""kill -9 of the main job (a real SIGKILL of a real ``python -m verl.trainer.main_ppo`` subprocess, 1 thread) twice
in a row at the worst spots, then a resume to the end: every step's metrics equal the uninterrupted run's bit for
bit, the prompts trained on at every step are the same (no batch skipped or repeated), and ``metrics.jsonl`` holds one
record per step. ``benchmarks/fault_injection.py`` is the long form (10 random kill points in a row)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow


def load_benchmark():
    spec = importlib.util.spec_from_file_location(
        "fault_injection", os.path.join(ROOT, "benchmarks", "fault_injection.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_killed_twice_in_a_row_then_resumed_equals_the_uninterrupted_run(tmp_path):
    bench = load_benchmark()
    kills = [
        # fresh run: step 1 committed; killed with step 2's role files written, before data.pt and the rename
        ("checkpoint.write", 2),
        # resumed from step 1: step 2 committed; step 3's checkpoint renamed and its record written, not committed
        ("metrics.logged", 2),
    ]
    result = bench.kill_and_resume(str(tmp_path), 4, ["trainer.save_freq=1", "trainer.test_freq=2"], kills)
    assert [(k["point"], k["step"], k["resumed_from"], k["exit"]) for k in result["kills"]] == [
        ("checkpoint.write", 2, 0, -9),
        ("metrics.logged", 3, 1, -9),
    ]
    assert result["problems"] == []
    # what the killed runs had written: step 3's record (its checkpoint never committed) was replaced, not doubled
    steps = [r["step"] for r in bench.records(str(tmp_path / "killed"))]
    assert steps == [0, 1, 2, 3, 4]
