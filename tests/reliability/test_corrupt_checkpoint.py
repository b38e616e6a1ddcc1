"""A truncated or corrupt latest checkpoint is detected and reported, and the run resumes from the previous good
one: its next steps equal the uninterrupted run's exactly (same seed, same bits on CPU)."""

from __future__ import annotations

import os

import pytest

from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config

pytestmark = pytest.mark.slow

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=4",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "trainer.save_freq=1",
    "trainer.test_freq=-1",
    "trainer.logger=[file]",
]


def run(root, steps: int):
    return run_ppo(
        load_config(
            "ppo_trainer", [*SMALL, f"trainer.default_local_dir={root}", f"trainer.total_training_steps={steps}"]
        )
    )


def numeric(history: dict, step: int) -> dict[str, float]:
    skip = ("timing_s/", "timing_per_token_ms/", "perf/time_per_step", "perf/throughput")
    return {k: dict(v)[step] for k, v in history.items() if not k.startswith(skip) and step in dict(v)}


def truncate(path) -> None:
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


@pytest.mark.parametrize("damage", ["actor shards truncated", "controller state corrupt"])
def test_a_damaged_latest_checkpoint_is_reported_and_the_previous_one_resumes_exactly(tmp_path, capsys, damage):
    full = run(tmp_path / "full", 3)
    run(tmp_path / "broken", 2)
    step2 = tmp_path / "broken" / "global_step_2"
    if damage == "actor shards truncated":
        (shard,) = (step2 / "actor" / "dcp").glob("*.distcp")
        truncate(shard)
    else:
        (step2 / "data.pt").write_bytes(b"not a checkpoint")
    capsys.readouterr()
    resumed = run(tmp_path / "broken", 3)
    out = capsys.readouterr().out
    assert f"checkpoint {step2} cannot be read" in out and "resumed from" in out and "global_step_1 at step 1" in out
    # steps 2 and 3 are computed again from step 1's checkpoint: exactly the uninterrupted run's
    assert [s for s, _ in resumed["history"]["actor/pg_loss"]] == [2, 3]
    for step in (2, 3):
        assert numeric(resumed["history"], step) == numeric(full["history"], step)


def test_no_readable_checkpoint_is_one_error_listing_each(tmp_path):
    run(tmp_path / "run", 1)
    (tmp_path / "run" / "global_step_1" / "data.pt").write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"no checkpoint of this run can be read:\n  .*global_step_1") as e:
        run(tmp_path / "run", 2)
    assert "trainer.resume_mode=disable" in str(e.value)
