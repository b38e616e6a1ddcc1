"""Same seed, same bits with 2 intra-op threads: the main job run twice in fresh subprocesses (the default
shared-prompt training passes on), every non-wall-clock metric equal exactly. ``benchmarks/reproducibility.py`` is
the long form (20 runs)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow


def load_benchmark():
    spec = importlib.util.spec_from_file_location(
        "reproducibility", os.path.join(ROOT, "benchmarks", "reproducibility.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_two_runs_with_two_threads_give_identical_metrics():
    bench = load_benchmark()
    small = [
        "data.train_files=builtin://arithmetic/train?train_size=256",
        "data.val_files=builtin://arithmetic/test?test_size=32",
        "trainer.test_freq=3",
    ]
    result = bench.main(["--runs", "2", "--steps", "3", "--threads", "2", *small])
    assert result["values"] > 50 and result["differing"] == []


def test_trainer_deterministic_runs_and_on_cpu_changes_no_bit(tmp_path):
    """``trainer.deterministic=true`` (torch's deterministic algorithms) runs the default job's ops, and on CPU it
    gives the very numbers of the default run: nothing in the CPU path depended on a nondeterministic kernel."""
    bench = load_benchmark()
    small = [
        "data.train_files=builtin://arithmetic/train?train_size=256",
        "data.val_files=builtin://arithmetic/test?test_size=32",
        "trainer.test_freq=2",
    ]
    plain = bench.run_metrics(str(tmp_path / "a"), 2, 2, small)
    forced = bench.run_metrics(str(tmp_path / "b"), 2, 2, [*small, "trainer.deterministic=true"])
    assert bench.first_difference(plain, forced) is None
