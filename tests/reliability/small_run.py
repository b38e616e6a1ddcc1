"""The small main-job run the reliability tests break: 4 prompts x 4 samples per step, a checkpoint every step, the
file logger; with helpers to compare what runs wrote, wall-clock values left out."""

from __future__ import annotations

import json
import os

from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config
from verl.utils.wall_clock import WALL_CLOCK

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


def run(root, steps: int, *extra: str) -> dict:
    overrides = [*SMALL, f"trainer.default_local_dir={root}", f"trainer.total_training_steps={steps}", *extra]
    return run_ppo(load_config("ppo_trainer", overrides))


def numeric(history: dict, step: int) -> dict[str, float]:
    """Step ``step``'s metrics in a run's history, wall-clock ones left out."""
    return {k: dict(v)[step] for k, v in history.items() if not k.startswith(WALL_CLOCK) and step in dict(v)}


def records(root) -> list[dict]:
    """The records of ``root/metrics.jsonl`` in file order, wall-clock values left out."""
    with open(os.path.join(root, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if not k.startswith(WALL_CLOCK)} for line in f]
