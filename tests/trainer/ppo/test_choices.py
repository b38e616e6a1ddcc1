"""Fail fast: a registry-backed choice that names nothing registered, or a data source without a scorer, is one
ConfigError naming the key and the registered names, raised before any model loads."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.trainer.ppo.choices import check_registered_choices
from verl.utils.config import ConfigError, load_config


@pytest.mark.parametrize(
    "override, key",
    [
        ("algorithm.adv_estimator=grop", "algorithm.adv_estimator='grop'"),
        ("actor_rollout_ref.actor.policy_loss.loss_mode=vanila", "policy_loss.loss_mode='vanila'"),
        ("algorithm.kl_penalty=low_var", "algorithm.kl_penalty='low_var'"),
        ("actor_rollout_ref.actor.kl_loss_type=k4", "kl_loss_type='k4'"),
        ("algorithm.kl_ctrl.type=adaptiv", "kl_ctrl.type='adaptiv'"),
        ("trainer.logger=[console,wandbb]", "trainer.logger='wandbb'"),
        ("actor_rollout_ref.rollout.name=vlm", "rollout.name='vlm'"),
        (
            "actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.agent.default_agent_loop=tool_agnt",
            "default_agent_loop='tool_agnt'",
        ),
    ],
)
def test_a_choice_nothing_is_registered_for_is_an_error_naming_key_and_names(override, key):
    with pytest.raises(ConfigError, match="registered names") as e:
        check_registered_choices(load_config("ppo_trainer", override.split()))
    assert key in str(e.value)


def test_a_loss_agg_mode_nothing_implements_is_an_error_naming_key_and_names_as_the_config_loads():
    """The actor's section checks its ``loss_agg_mode`` when it is built, and ``load_config`` builds it."""
    with pytest.raises(ConfigError, match=r"^actor_rollout_ref\.actor: .*loss_agg_mode 'token_mean'") as e:
        load_config("ppo_trainer", ["actor_rollout_ref.actor.loss_agg_mode=token_mean"])
    assert "token-mean" in str(e.value)  # the names that are implemented


def test_every_error_at_once_and_verl_names_that_run_otherwise_pass():
    with pytest.raises(ConfigError) as e:
        check_registered_choices(load_config("ppo_trainer", ["algorithm.adv_estimator=x", "trainer.logger=[y]"]))
    assert "adv_estimator='x'" in str(e.value) and "trainer.logger='y'" in str(e.value)
    ok = ["actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.actor.kl_loss_type=low_var_kl+"]
    check_registered_choices(load_config("ppo_trainer", ok))  # sglang warns and runs the HF sampler; '+' is verl's
    check_registered_choices(load_config("ppo_trainer"))  # the defaults


def test_an_estimator_registered_by_user_code_is_accepted():
    from verl.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    @register_adv_est("my_test_estimator")
    def my_estimator(**kwargs):  # pragma: no cover - only its name is looked up
        raise NotImplementedError

    try:
        check_registered_choices(load_config("ppo_trainer", ["algorithm.adv_estimator=my_test_estimator"]))
    finally:
        ADV_ESTIMATOR_REGISTRY.pop("my_test_estimator")


def test_a_data_source_without_a_scorer_fails_at_data_load_naming_it(tmp_path):
    """Before any model is built: the job stops at data load, naming the file's unknown sources and the fixes."""
    from verl.trainer.main_ppo import build_trainer

    rows = [
        {
            "prompt": [{"role": "user", "content": "2+2="}],
            "data_source": "my_task",
            "reward_model": {"ground_truth": "4"},
        },
        {
            "prompt": [{"role": "user", "content": "3+3="}],
            "data_source": "arithmetic",
            "reward_model": {"ground_truth": "6"},
        },
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    config = load_config(
        "ppo_trainer",
        ["recipe=quickstart", f"data.train_files={path}", f"trainer.default_local_dir={tmp_path / 'run'}"],
    )
    with pytest.raises(ConfigError, match=r"data\.train_files: data_source values \['my_task'\]") as e:
        build_trainer(config)
    assert "custom_reward_function.path" in str(e.value) and "arithmetic" in str(e.value)
    reward = tmp_path / "reward.py"
    reward.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n")
    config = load_config(
        "ppo_trainer",
        ["recipe=quickstart", f"data.train_files={path}", f"custom_reward_function.path={reward}",
         f"trainer.default_local_dir={tmp_path / 'b'}", "trainer.total_training_steps=0"],
    )  # fmt: skip
    from verl.trainer.ppo.choices import check_data_sources
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.model import load_tokenizer

    dataset = RLHFDataset([str(path)], load_tokenizer(config.actor_rollout_ref.model.path), config.data)
    check_data_sources(config, {"data.train_files": dataset})  # a custom function scores them: no error
