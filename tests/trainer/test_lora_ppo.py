"""PPO-family runs with LoRA (``model.lora_rank``) on the shipped tiny warm start, in one process.

The reference policy is the actor with its adapters off, checkpoints hold the adapter alone, and a resumed run gives
the uninterrupted run's next step exactly: same seed, same results on CPU, bit for bit.
"""

from __future__ import annotations

import os

import pytest

from verl.engine import StepCallback
from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config

pytest.importorskip("peft", reason="LoRA needs peft: pip install peft")

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=4",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.optim.lr=1e-3",
    "actor_rollout_ref.actor.use_kl_loss=true",
    "actor_rollout_ref.model.lora_rank=8",
    "actor_rollout_ref.model.lora_alpha=16",
    "trainer.total_training_steps=3",
    "trainer.save_freq=1",
    "trainer.test_freq=-1",
    "trainer.logger=[file]",
]


class StopAfter(StepCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, batch, metrics) -> bool:
        return trainer.global_steps < self.step  # False: stop the run here


def last(history: dict, key: str, step: int) -> float:
    return dict(history[key])[step]


def numeric(history: dict, step: int) -> dict[str, float]:
    skip = ("timing_s/", "timing_per_token_ms/", "perf/time_per_step", "perf/throughput")
    return {k: dict(v)[step] for k, v in history.items() if not k.startswith(skip) and step in dict(v)}


@pytest.mark.slow
def test_lora_grpo_trains_adapters_against_the_base_and_resumes_exactly(tmp_path):
    full = run_ppo(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path / 'full'}"]))
    h = full["history"]
    # the reference is the base (adapters off): the KL term grows as the adapters move away from it
    assert 0 < last(h, "actor/kl_loss", 1) < last(h, "actor/kl_loss", 2) < last(h, "actor/kl_loss", 3)
    # only the adapters carry optimizer state: 2 Adam moments of ~90k adapter parameters, not of the 0.5M model
    assert last(h, "perf/actor_optim_state_mb", 3) < 0.3 * last(h, "perf/actor_param_mb", 3)
    actor = tmp_path / "full" / "global_step_3" / "actor"
    assert sorted(os.listdir(actor)) == ["dcp", "extra_state.pt", "lora_adapter"]  # no full HF copy of the base
    assert (actor / "lora_adapter" / "adapter_model.safetensors").stat().st_size < 500_000

    cfg = load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path / 'resumed'}"])
    run_ppo(cfg, callbacks=[StopAfter(2)])  # "killed" after step 2
    resumed = run_ppo(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path / 'resumed'}"]))
    assert resumed["history"]["actor/pg_loss"][0][0] == 3  # it started at step 3 from the adapter checkpoint
    assert numeric(resumed["history"], 3) == numeric(h, 3)


@pytest.mark.slow
def test_lora_adapter_path_starts_from_a_saved_adapter(tmp_path):
    """``lora_adapter_path`` = a checkpoint's lora_adapter/: the new run's first validation is the old run's last."""
    args = [*SMALL, "trainer.total_training_steps=2", "trainer.test_freq=2", "trainer.save_freq=2"]
    first = run_ppo(load_config("ppo_trainer", [*args, f"trainer.default_local_dir={tmp_path / 'a'}"]))
    adapter = tmp_path / "a" / "global_step_2" / "actor" / "lora_adapter"
    args += [f"actor_rollout_ref.model.lora_adapter_path={adapter}", "trainer.total_training_steps=1"]
    second = run_ppo(load_config("ppo_trainer", [*args, f"trainer.default_local_dir={tmp_path / 'b'}"]))
    assert last(second["history"], "val-core/acc", 0) == last(first["history"], "val-core/acc", 2)
