"""``reward_model.launch_reward_fn_async``: scoring runs in a background thread beside the reference pass and is
joined before the advantages; the steps are bit for bit those of scoring in the step (CPU, same seed)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from verl.trainer.main_ppo import build_trainer
from verl.utils.config import load_config

SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.actor.use_kl_loss=true",  # a reference pass for the scoring to overlap
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
    "trainer.resume_mode=disable",
]


def two_steps(tmp_path, *extra):
    trainer = build_trainer(load_config("ppo_trainer", [*SMALL, f"trainer.default_local_dir={tmp_path}", *extra]))
    events = []
    score, ref = trainer.reward_fn, trainer.actor_rollout_wg.compute_ref_log_prob

    def slow_score(data, **kwargs):  # a scorer that waits, as one on sandboxes or a server does
        events.append(("score start", threading.current_thread() is threading.main_thread()))
        time.sleep(0.5)
        result = score(data, **kwargs)
        events.append(("score end", None))
        return result

    def recorded_ref(data):
        events.append(("ref", None))
        return ref(data)

    trainer.reward_fn, trainer.actor_rollout_wg.compute_ref_log_prob = slow_score, recorded_ref
    metrics = [trainer.train_step() for _ in range(2)]
    trainer.close()
    return metrics, trainer.actor_rollout_wg.actor_module, events


@pytest.mark.slow
def test_async_scoring_overlaps_the_reference_pass_and_changes_nothing(tmp_path):
    inline, module_a, events_a = two_steps(tmp_path / "a")
    overlapped, module_b, events_b = two_steps(tmp_path / "b", "reward_model.launch_reward_fn_async=true")
    names = [name for name, _ in events_a]
    assert names == ["score start", "score end", "ref"] * 2 and all(main for _, main in events_a if main is not None)
    names = [name for name, _ in events_b]
    for step in (names[:3], names[3:]):  # the pass ran while the scorer waited (before or after its first line)
        assert sorted(step) == ["ref", "score end", "score start"] and step.index("ref") < step.index("score end")
    assert not any(main for _, main in events_b if main is not None)  # in the background thread
    for a, b in zip(inline, overlapped):
        for key in ("critic/score/mean", "actor/pg_loss", "actor/kl_loss", "response_length/mean"):
            assert a[key] == b[key], key
        assert b["timing_s/reward"] < a["timing_s/reward"]  # only the wait is left in the step
    for p, q in zip(module_a.parameters(), module_b.parameters()):
        assert torch.equal(p, q)
