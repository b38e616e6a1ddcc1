"""``trainer.v1.trainer_mode=colocate_async`` end to end on the tiny model: at zero lag the bits of the synchronous
trainer; one-step-off the same bits run to run (2 threads, two concurrent Python threads of torch work); staleness
from the metrics never beyond the threshold; kill -9 and resume equal to the uninterrupted run."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config
from verl.utils.wall_clock import WALL_CLOCK

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
pytestmark = pytest.mark.slow

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=128",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=8",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "trainer.save_freq=-1",
    "trainer.test_freq=5",
    "trainer.logger=[file]",
    "trainer.total_training_steps=5",
]
COLOCATE = "trainer.v1.trainer_mode=colocate_async"


def run(root, *extra: str) -> list[dict]:
    run_ppo(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={root}", *extra]))
    with open(os.path.join(root, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if not k.startswith(WALL_CLOCK)} for line in f]


def test_zero_lag_is_the_synchronous_trainer_bit_for_bit(tmp_path):
    sync = run(tmp_path / "sync", "trainer.num_threads=1")
    colocated = run(
        tmp_path / "ca0", "trainer.num_threads=1", COLOCATE, "trainer.v1.colocate_async.num_warmup_batches=0"
    )
    assert len(sync) == 6 and sync == colocated  # step 0's validation and 5 steps, every metric equal
    assert all(r["training/off_policy/trajectory_staleness/max"] == 0 for r in sync[1:])


def test_one_step_off_is_reproducible_and_never_staler_than_the_threshold(tmp_path):
    args = ("trainer.num_threads=2", COLOCATE, "trainer.v1.sampler.max_off_policy_threshold=1")
    first, second = run(tmp_path / "a", *args), run(tmp_path / "b", *args)
    assert first == second
    staleness = [r["training/off_policy/trajectory_staleness/max"] for r in first[1:]]
    assert staleness == [0, 1, 1, 1, 1]  # step 1 trains the first warm-up batch, then each one is one step old
    assert all(r["training/off_policy/trajectory_spans/max"] == 1 for r in first[1:])
    sync = run(tmp_path / "sync", "trainer.num_threads=2")
    assert sync[1] == first[1] and sync[2] != first[2]  # the same first step, then a different (older) batch


def load_fault_injection():
    spec = importlib.util.spec_from_file_location(
        "fault_injection", os.path.join(ROOT, "benchmarks/fault_injection.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_kill_9_and_resume_equals_the_uninterrupted_one_step_off_run(tmp_path):
    """Killed while the next batch is being generated ahead, and while a checkpoint is written: the resumed run
    trains on the batches the uninterrupted one did, every metric equal."""
    bench = load_fault_injection()
    kills = [("rollout.generate", 3), ("checkpoint.write", 2)]
    overrides = ["trainer.save_freq=1", "trainer.test_freq=2", COLOCATE]
    result = bench.kill_and_resume(str(tmp_path), 4, overrides, kills)
    assert [k["exit"] for k in result["kills"]] == [-9, -9]
    assert result["problems"] == []


def test_lora_policy_hands_its_adapters_to_the_ahead_engine(tmp_path):
    """A LoRA policy: the ahead engine's copy gets each version's adapters (the frozen base never changes), so at zero
    lag it samples the tokens the synchronous trainer samples, every metric equal."""
    lora = ["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16", "trainer.num_threads=1"]
    sync = run(tmp_path / "sync", *lora)
    colocated = run(tmp_path / "ca0", *lora, COLOCATE, "trainer.v1.colocate_async.num_warmup_batches=0")
    assert sync == colocated


def test_partial_rollout_spans_two_versions_reproducibly_and_resumes_from_a_kill(tmp_path):
    """``partial_rollout_tokens=2`` one step off: each batch's first 2 response tokens are sampled ahead by the
    previous version, the rest by the version it is trained at. Same bits run to run (2 threads); a kill -9 while a
    segment is generated, and one while a checkpoint (holding a round cut half-way) is written, resume to the
    uninterrupted run's metrics."""
    args = ("trainer.num_threads=2", COLOCATE, "trainer.v1.partial_rollout_tokens=2")
    first, second = run(tmp_path / "a", *args), run(tmp_path / "b", *args)
    assert first == second
    spans = [r["training/off_policy/trajectory_spans/max"] for r in first[1:]]
    assert spans == [1, 2, 2, 2, 2]  # step 1's warm-up batch is sampled whole by version 0
    for r in first[2:]:
        assert r["training/off_policy/trajectory_staleness/max"] == 0  # every unfinished row ends under the trainer's
        assert r["training/off_policy/trajectory_staleness_worst/max"] == 1
    uncut = run(tmp_path / "uncut", "trainer.num_threads=2", COLOCATE)
    assert uncut[1] != first[1] or uncut[2] != first[2]
    bench = load_fault_injection()
    kills = [("rollout.generate", 4), ("checkpoint.write", 2)]
    overrides = ["trainer.save_freq=1", "trainer.test_freq=2", COLOCATE, "trainer.v1.partial_rollout_tokens=2"]
    result = bench.kill_and_resume(str(tmp_path / "kill"), 4, overrides, kills)
    assert [k["exit"] for k in result["kills"]] == [-9, -9]
    assert result["problems"] == []
