"""verl's keys take verl's defaults; our tuned values for the built-in task live in the ``quickstart`` recipe.

verl's defaults come from the key list of its composed PPO config shipped beside the schema
(``verl/trainer/config/verl_ppo_trainer_keys.yaml``, interpolations resolved as verl resolves them). A key whose
default differs must be listed, with its reason, in ``VERL_DEFAULT_EXCEPTIONS``.
"""

from __future__ import annotations

import pytest
import yaml

from verl.trainer.config import ppo_trainer
from verl.utils.config import ConfigError, load_config, recipe_path
from verl.utils.config_reference import verl_default_differences


def differences() -> dict[str, tuple]:
    return verl_default_differences("ppo_trainer")


def test_every_verl_key_has_verl_default_or_an_argued_exception():
    unlisted = {k: v for k, v in differences().items() if k not in ppo_trainer.VERL_DEFAULT_EXCEPTIONS}
    assert not unlisted, "defaults that differ from verl's without a reason in VERL_DEFAULT_EXCEPTIONS:\n" + "\n".join(
        f"  {k}: ours {m!r}, verl {t!r}" for k, (m, t) in unlisted.items()
    )


def test_no_stale_exception():
    stale = sorted(set(ppo_trainer.VERL_DEFAULT_EXCEPTIONS) - set(differences()))
    assert not stale, f"listed as exceptions but equal to verl's default (remove them): {stale}"


def test_the_issue_named_keys_take_verl_defaults():
    cfg = load_config("ppo_trainer", ["actor_rollout_ref.model.path=/models/mine", "data.train_files=/d/t.parquet"])
    assert cfg.recipe == "none"
    assert cfg.actor_rollout_ref.rollout.temperature == 1.0
    assert cfg.actor_rollout_ref.actor.optim.lr == 1e-6
    assert cfg.actor_rollout_ref.actor.optim.lr_scheduler_type == "constant"
    assert cfg.actor_rollout_ref.actor.trust_region.enable is False
    assert cfg.algorithm.adv_estimator == "gae" and cfg.actor_rollout_ref.rollout.n == 1


def test_the_bare_job_is_the_quickstart_recipe():
    cfg = load_config("ppo_trainer")
    assert cfg.recipe == "quickstart"
    with open(recipe_path("quickstart")) as f:
        recipe = yaml.safe_load(f)
    for section in ("actor_rollout_ref", "data", "algorithm"):
        assert section in recipe
    assert cfg.actor_rollout_ref.rollout.temperature == recipe["actor_rollout_ref"]["rollout"]["temperature"] == 0.5
    assert cfg.actor_rollout_ref.actor.optim.lr == 2e-4 and cfg.actor_rollout_ref.actor.trust_region.enable
    assert cfg.data.train_files == ["builtin://arithmetic/train"] and cfg.trainer.total_training_steps == 200


def test_builtin_paths_are_the_built_in_task_and_a_named_recipe_applies_anywhere(tmp_path):
    assert load_config("ppo_trainer", ["actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft"]).recipe == (
        "quickstart"
    )
    cfg = load_config(
        "ppo_trainer", ["actor_rollout_ref.model.path=/m", "recipe=quickstart", "data.train_batch_size=8"]
    )
    assert cfg.recipe == "quickstart" and cfg.actor_rollout_ref.rollout.temperature == 0.5
    assert cfg.actor_rollout_ref.model.path == "/m" and cfg.data.train_batch_size == 8  # the command line wins
    assert load_config("ppo_trainer", ["recipe=none"]).actor_rollout_ref.rollout.temperature == 1.0
    mine = tmp_path / "mine.yaml"
    mine.write_text("actor_rollout_ref:\n  rollout:\n    temperature: 0.7\n")
    cfg = load_config("ppo_trainer", [f"recipe={mine}", "actor_rollout_ref.model.path=/m"])
    assert cfg.actor_rollout_ref.rollout.temperature == 0.7 and cfg.recipe == str(mine)
    assert load_config("ppo_trainer", overrides={"recipe": "quickstart", "data.train_files": "/x"}).recipe == (
        "quickstart"
    )


def test_an_unknown_recipe_names_the_choices():
    with pytest.raises(ConfigError, match=r"unknown recipe 'quickstrat': one of \['quickstart'\]"):
        load_config("ppo_trainer", ["recipe=quickstrat"])


# verl's examples/grpo_trainer/run_qwen2-7b.sh: its keys, with a model directory and data files of one's own. It sets
# no temperature, so it must sample at verl's 1.0 here too.
VERL_GRPO_SCRIPT = """
    algorithm.adv_estimator=grpo data.train_batch_size=1024 data.max_prompt_length=512 data.max_response_length=1024
    data.filter_overlong_prompts=True data.truncation=error actor_rollout_ref.actor.optim.lr=1e-6
    actor_rollout_ref.model.use_remove_padding=True actor_rollout_ref.actor.ppo_mini_batch_size=256
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40 actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.actor.kl_loss_coef=0.001 actor_rollout_ref.actor.kl_loss_type=low_var_kl
    actor_rollout_ref.actor.entropy_coeff=0 actor_rollout_ref.model.enable_gradient_checkpointing=True
    actor_rollout_ref.actor.fsdp_config.param_offload=False actor_rollout_ref.actor.fsdp_config.optimizer_offload=False
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40 actor_rollout_ref.rollout.tensor_model_parallel_size=2
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.gpu_memory_utilization=0.6
    actor_rollout_ref.rollout.n=5 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40
    actor_rollout_ref.ref.fsdp_config.param_offload=True algorithm.use_kl_in_reward=False trainer.critic_warmup=0
    trainer.logger=["console","wandb"] trainer.project_name=verl_grpo_example_gsm8k
    trainer.experiment_name=qwen2_7b_function_rm trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.save_freq=20
    trainer.test_freq=5 trainer.total_epochs=15
"""


def test_a_ported_verl_grpo_script_samples_at_temperature_one(tmp_path):
    argv = VERL_GRPO_SCRIPT.split() + [
        f"actor_rollout_ref.model.path={tmp_path / 'Qwen2-7B-Instruct'}",
        f"data.train_files={tmp_path / 'train.parquet'}",
        f"data.val_files={tmp_path / 'test.parquet'}",
    ]
    cfg = load_config("ppo_trainer", argv)
    assert cfg.recipe == "none"
    assert cfg.actor_rollout_ref.rollout.temperature == 1.0 and cfg.actor_rollout_ref.rollout.do_sample
    assert cfg.actor_rollout_ref.actor.trust_region.enable is False  # verl's constant rate
    # what the sampler is handed: the rollout section's own sampling parameters
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import RolloutConfig

    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout, RolloutConfig)
    assert rollout.temperature == 1.0
