"""verl.trainer.config.checks: ``algorithm.rollout_correction`` settings that cannot run are errors at load time,
each naming the key and the fix."""

import pytest

from verl.trainer.config.checks import check_ppo_config
from verl.utils.config import ConfigError, load_config

RC = "algorithm.rollout_correction"
LOG_PROBS = "actor_rollout_ref.rollout.calculate_log_probs=true"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ([f"{RC}.rollout_is=seq", LOG_PROBS], r"rollout_is='seq': use one of token, sequence, geometric"),
        ([f"{RC}.rollout_is=token", f"{RC}.rollout_is_threshold=0", LOG_PROBS], "rollout_is_threshold=0.0"),
        ([f"{RC}.rollout_rs=seq_max_k1", f"{RC}.rollout_rs_threshold=2", LOG_PROBS], "unknown option 'seq_max_k1'"),
        ([f"{RC}.rollout_rs=token_k2", LOG_PROBS], "rollout_rs_threshold=None"),
        ([f"{RC}.rollout_rs=token_k3", f"{RC}.rollout_rs_threshold=0.01"], r"calculate_log_probs=true"),
        (
            [f"{RC}.rollout_is=token", "actor_rollout_ref.actor.tis_imp_ratio_cap=2.0", LOG_PROBS],
            r"rollout_is=token and actor_rollout_ref\.actor\.tis_imp_ratio_cap=2\.0",
        ),
        (
            [f"{RC}.bypass_mode=true"],
            rf"{RC}\.bypass_mode=true takes the sampler's log-probs.*calculate_log_probs=true",
        ),
        (
            [f"{RC}.bypass_mode=true", f"{RC}.loss_type=ppo", LOG_PROBS],
            r"loss_type='ppo': use one of ppo_clip, reinforce",
        ),
        (
            [f"{RC}.bypass_mode=true", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo", LOG_PROBS],
            r"runs its own loss.*loss_mode=gspo: keep one",
        ),
        (
            [f"{RC}.bypass_mode=true", "actor_rollout_ref.actor.tis_imp_ratio_cap=2", LOG_PROBS],
            r"bypass_mode=true and actor_rollout_ref\.actor\.tis_imp_ratio_cap=2",
        ),
        (["actor_rollout_ref.actor.policy_loss.loss_mode=bypass_mode"], rf"set {RC}\.bypass_mode=true instead"),
    ],
)
def test_unusable_rollout_correction_is_an_error_naming_the_key(overrides, match):
    with pytest.raises(ConfigError, match=match):
        check_ppo_config(load_config("ppo_trainer", overrides))


@pytest.mark.slow
def test_usable_rollout_corrections_pass():
    for overrides in (
        [],
        [f"{RC}.rollout_is=geometric", f"{RC}.rollout_is_batch_normalize=true", LOG_PROBS],
        [f"{RC}.rollout_rs='token_k1,seq_max_k3'", f"{RC}.rollout_rs_threshold='0.5_2.0,0.01'", LOG_PROBS],
        [
            f"{RC}.rollout_rs=token_k2",
            f"{RC}.rollout_rs_threshold=0.01",
            "actor_rollout_ref.actor.tis_imp_ratio_cap=2",
            LOG_PROBS,
        ],
        [f"{RC}.bypass_mode=true", LOG_PROBS],
        [f"{RC}.bypass_mode=true", f"{RC}.loss_type=reinforce", f"{RC}.rollout_is=sequence", LOG_PROBS],
    ):
        check_ppo_config(load_config("ppo_trainer", overrides))
