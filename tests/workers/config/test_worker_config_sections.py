"""The worker config dataclasses check what verl's check when built, keep verl's names and defaults where a ported
script reads them, and stay frozen except the batch sizes verl's workers normalise in place."""

import dataclasses
import warnings

import pytest

from verl.utils.config import load_config, omega_conf_to_dataclass
from verl.workers.config import (
    ActorRolloutRefConfig,
    FSDPActorConfig,
    FSDPCriticConfig,
    FSDPEngineConfig,
    FSDPOptimizerConfig,
    McoreActorConfig,
    McoreEngineConfig,
    OptimizerConfig,
)


def test_warmup_style_is_verls_older_name_of_lr_scheduler_type():
    assert FSDPOptimizerConfig().lr_scheduler_type == "constant" and FSDPOptimizerConfig().min_lr_ratio is None
    with pytest.warns(DeprecationWarning, match="lr_scheduler_type"):
        config = FSDPOptimizerConfig(warmup_style="cosine")
    assert config.lr_scheduler_type == "cosine"
    for bad in ({"lr_scheduler_type": "linear"}, {"warmup_style": "linear"}):
        with pytest.raises(ValueError, match="constant"):
            FSDPOptimizerConfig(**bad)


def test_num_cycles_and_a_null_min_lr_ratio_reach_the_schedule():
    import torch

    from verl.workers.fsdp_workers import build_optimizer

    module = torch.nn.Linear(2, 2)
    lrs = {}
    for cycles in (0.5, 1.0):
        optim = OptimizerConfig(lr=1.0, lr_scheduler_type="cosine", num_cycles=cycles, min_lr_ratio=None)
        optimizer, scheduler = build_optimizer(module, optim, total_steps=4)
        lrs[cycles] = []
        for _ in range(4):
            lrs[cycles].append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
    assert lrs[0.5] == pytest.approx([1.0, 0.8535534, 0.5, 0.1464466])  # one half-period down to lr * 0
    assert lrs[1.0] == pytest.approx([1.0, 0.5, 0.0, 0.5])  # a whole period: down and back up


def test_actor_checks_its_loss_aggregation_and_micro_batch_sizes():
    with pytest.raises(ValueError, match="Invalid loss_agg_mode 'token-avg'"):
        FSDPActorConfig(loss_agg_mode="token-avg")
    with pytest.raises(ValueError, match="You have set both 'actor.ppo_micro_batch_size'"):
        FSDPActorConfig(ppo_micro_batch_size=8, ppo_micro_batch_size_per_gpu=4)
    with pytest.raises(ValueError, match="Please set at least one of 'actor.ppo_micro_batch_size_per_gpu'"):
        FSDPActorConfig(ppo_micro_batch_size_per_gpu=None)
    assert FSDPActorConfig(ppo_micro_batch_size_per_gpu=None, use_dynamic_bsz=True).use_dynamic_bsz


def test_actor_validate_against_the_run():
    config = FSDPActorConfig(ppo_mini_batch_size=8, ppo_micro_batch_size=2, ppo_micro_batch_size_per_gpu=None)
    with pytest.raises(ValueError, match="data.train_batch_size \\(4\\) must be >= actor.ppo_mini_batch_size"):
        config.validate(n_gpus=1, train_batch_size=4)
    with pytest.raises(ValueError, match="must be >= n_gpus \\(4\\)"):
        config.validate(n_gpus=4, train_batch_size=8)
    sp = FSDPActorConfig(ulysses_sequence_parallel_size=2, ppo_mini_batch_size=16)
    with pytest.raises(ValueError, match="use_remove_padding"):
        sp.validate(n_gpus=2, train_batch_size=16, model_config={"use_remove_padding": False})


def test_critic_checks_its_micro_batch_sizes():
    with pytest.raises(ValueError, match="You have set both 'critic.ppo_micro_batch_size'"):
        FSDPCriticConfig(ppo_micro_batch_size=4)  # the per-worker default 128 is set too
    with pytest.raises(ValueError, match="ppo_mini_batch_size \\(7\\) must be divisible by ppo_micro_batch_size"):
        FSDPCriticConfig(ppo_mini_batch_size=7, ppo_micro_batch_size=4, ppo_micro_batch_size_per_gpu=None)
    # sequence parallelism is not implemented: > 1 warns and runs (verl's use_remove_padding requirement is moot)
    assert FSDPCriticConfig(ulysses_sequence_parallel_size=2).ulysses_sequence_parallel_size == 2


def test_only_batch_sizes_are_mutable():
    actor = FSDPActorConfig()
    actor.ppo_mini_batch_size = 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        actor.clip_ratio = 0.3
    critic = FSDPCriticConfig()
    critic.forward_micro_batch_size_per_gpu = 8
    with pytest.raises(AttributeError):
        critic.cliprange_value = 0.1


def test_megatron_sections_construct_with_verls_defaults():
    engine = McoreEngineConfig()
    assert engine.sequence_parallel is False  # tensor parallelism 1: sequence parallelism off, as in verl
    assert McoreEngineConfig(tensor_model_parallel_size=2).sequence_parallel is True
    engine.sequence_parallel = True  # verl's one mutable engine field
    actor = omega_conf_to_dataclass(
        {
            "_target_": "verl.workers.config.McoreActorConfig",
            "ppo_micro_batch_size_per_gpu": 2,
            "optim": {"_target_": "verl.workers.config.McoreOptimizerConfig", "lr": 0.1},
        }
    )
    assert isinstance(actor, McoreActorConfig) and actor.strategy == "megatron" and actor.optim.lr == 0.1
    assert FSDPEngineConfig(wrap_policy={"min_num_params": 0}).wrap_policy == {"min_num_params": 0}


@pytest.mark.slow
def test_the_loaded_sections_build_their_dataclasses_with_derived_keys():
    config = load_config(
        "ppo_trainer", ["actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.optim.warmup_style=cosine"]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        section = omega_conf_to_dataclass(config.actor_rollout_ref, ActorRolloutRefConfig)
    assert section.actor.rollout_n == section.ref.rollout_n == 4
    assert section.actor.optim.lr_scheduler_type == "cosine"
    assert section.rollout.profiler.enable is False and section.ref.fsdp_config.forward_only is True
    critic = omega_conf_to_dataclass(
        load_config("ppo_trainer", ["critic.ppo_micro_batch_size_per_gpu=16"]).critic, FSDPCriticConfig
    )
    assert critic.forward_micro_batch_size_per_gpu == 16  # the value pass follows the update's micro-batch


def test_the_trainer_samples_at_half_temperature_and_generation_at_verls_one():
    """The trainer's rollout samples at 0.5 (docs/results.md, "Rollout temperature"); main_generation keeps verl's
    1.0, and a script's own temperature wins."""
    assert load_config("ppo_trainer").actor_rollout_ref.rollout.temperature == 0.5
    assert load_config("generation").rollout.temperature == 1.0
    ported = load_config("ppo_trainer", ["actor_rollout_ref.rollout.temperature=1.0"])
    assert ported.actor_rollout_ref.rollout.temperature == 1.0
