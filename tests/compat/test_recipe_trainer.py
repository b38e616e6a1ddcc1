"""A recipe builds the trainer the way verl's recipes do (DAPO's main_dapo.py: a role -> Ray remote worker class
mapping, a resource pool manager, ``init_workers()``, ``fit()``) and it trains: the same controller main_ppo runs."""

from __future__ import annotations

import pytest

from verl.trainer.ppo.ray_trainer import RayPPOTrainer, ResourcePoolManager, Role
from verl.utils import hf_tokenizer
from verl.utils.config import load_config
from verl.workers.fsdp_workers import ActorRolloutRefWorker, CriticWorker
from verl.workers.reward_manager import NaiveRewardManager

ray = pytest.importorskip(
    "ray", reason="verl's recipes wrap worker classes with ray.remote: pip install 'ray[default]'"
)

TINY = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.rollout.n=2",
    "trainer.total_training_steps=2",
    "trainer.test_freq=2",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
]


@pytest.mark.slow
def test_dapo_style_construction_trains_with_critic_and_reference(tmp_path):
    config = load_config(
        "ppo_trainer",
        [*TINY, "algorithm.adv_estimator=gae", "actor_rollout_ref.actor.use_kl_loss=true"],
        overrides={"trainer.default_local_dir": str(tmp_path)},
    )
    tokenizer = hf_tokenizer(config.actor_rollout_ref.model.path)
    role_worker_mapping = {
        Role.ActorRollout: ray.remote(ActorRolloutRefWorker),
        Role.Critic: ray.remote(CriticWorker),
        Role.RefPolicy: ray.remote(ActorRolloutRefWorker),  # verl's separate reference role: joins the policy worker
    }
    global_pool_id = "global_pool"
    resource_pool_spec = {global_pool_id: [config.trainer.n_gpus_per_node] * config.trainer.nnodes}
    mapping = {role: global_pool_id for role in role_worker_mapping}
    reward_fn = NaiveRewardManager(tokenizer=tokenizer, num_examine=0)
    val_reward_fn = NaiveRewardManager(tokenizer=tokenizer, num_examine=1)
    trainer = RayPPOTrainer(
        config=config,
        tokenizer=tokenizer,
        role_worker_mapping=role_worker_mapping,
        resource_pool_manager=ResourcePoolManager(resource_pool_spec=resource_pool_spec, mapping=mapping),
        reward_fn=reward_fn,
        val_reward_fn=val_reward_fn,
        device_name="cpu",
    )
    try:
        trainer.init_workers()
        assert trainer.use_critic and trainer.use_reference_policy and trainer.critic_wg is not None
        result = trainer.fit()
    finally:
        trainer.shutdown()
    assert result["global_steps"] == 2
    history = result["history"]
    assert [s for s, _ in history["actor/pg_loss"]] == [1, 2] and "critic/vf_loss" in history
    assert "actor/kl_loss" in history  # the reference policy ran inside the policy worker
    assert "val-core/acc" in history and (tmp_path / "metrics.jsonl").exists()


def test_role_names_and_lookup_follow_verl():
    assert str(Role.ActorRollout) == "actor_rollout" and Role.from_string("critic") is Role.Critic
    assert str(Role.RefPolicy) == "ref" and Role.ActorRolloutRef.handle == "actor_rollout"
    with pytest.raises(ValueError, match="no Role named 'nope'"):
        Role.from_string("nope")
