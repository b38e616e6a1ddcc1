"""The keys of asynchronous training: verl's V1 trainer modes (``trainer.v1.*``) and the ``async_training`` section of
verl's one-step-off and fully-async entry points. docs/async.md explains the modes and every key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig

__all__ = [
    "AsyncTrainingConfig",
    "ColocateAsyncConfig",
    "CustomSamplerConfig",
    "HybridRolloutSwitchConfig",
    "SeparateAsyncConfig",
    "StandaloneRolloutConfig",
    "V1SamplerConfig",
    "V1TrainerConfig",
]

TRAINER_MODES = ("sync", "colocate_async", "separate_async")
OFF_POLICY_STRATEGIES = ("drop", "wait")


@dataclass
class ColocateAsyncConfig(BaseConfig):
    """``colocate_async``: the rollout and the trainer share the workers; batches are generated ahead."""

    # batches generated before the first update, so each step trains on a batch sampled this many versions back
    # while the next one is generated (0: no overlap, the bits of trainer_mode=sync; 1: one-step-off)
    num_warmup_batches: int = 1


@dataclass
class HybridRolloutSwitchConfig(BaseConfig):
    """verl's step switching of ``separate_async`` (lend idle trainer workers to rollout): not built here."""

    enable_switch: bool = False  # not implemented (true is an error naming this key)
    switch_threshold_ratio: float = 0.4  # with enable_switch only
    adaptive_switch_threshold: bool = True  # with enable_switch only
    switch_threshold_step_up: float = 0.05  # with enable_switch only
    switch_threshold_step_down: float = 0.03  # with enable_switch only
    switch_threshold_release_steps: int = 2  # with enable_switch only
    switch_cost_window_size: int = 3  # with enable_switch only


@dataclass
class SeparateAsyncConfig(BaseConfig):
    """``separate_async``: standalone rollout replicas generate continuously beside the trainer."""

    num_warmup_batches: int = 1  # batches requested from the replicas before the first update
    # PPO mini-batches trained per weight sync; train_batch_size = parameter_sync_step x ppo_mini_batch_size
    parameter_sync_step: int = 4
    hybrid_rollout: HybridRolloutSwitchConfig = field(default_factory=HybridRolloutSwitchConfig)  # not built here


@dataclass
class CustomSamplerConfig(BaseConfig):
    """A sampler class of your own for the replay buffer (verl's key): not supported here."""

    path: str | None = None  # a value is an error: the built-in staleness sampler only
    name: str | None = None  # as path


@dataclass
class V1SamplerConfig(BaseConfig):
    """How the replay buffer picks prompt groups for training, and what it does with stale ones."""

    # most model versions between a group's first generated token and its update; older groups are handled by
    # max_off_policy_strategy
    max_off_policy_threshold: int = 8
    # drop: evict a stale group and refill one prompt from the dataloader | wait: train it before it gets older
    max_off_policy_strategy: str = "drop"
    sync_refill_failed_groups: bool = False  # refill failed groups before sampling (here refills always are)
    custom_sampler: CustomSamplerConfig = field(default_factory=CustomSamplerConfig)  # not supported
    sampler_kwargs: dict[str, Any] = field(default_factory=dict)  # keyword arguments of a custom sampler

    def __post_init__(self):
        if self.max_off_policy_strategy not in OFF_POLICY_STRATEGIES:
            raise ValueError(
                f"trainer.v1.sampler.max_off_policy_strategy={self.max_off_policy_strategy!r}: use drop or wait"
            )
        if self.max_off_policy_threshold < 0:
            raise ValueError(
                f"trainer.v1.sampler.max_off_policy_threshold={self.max_off_policy_threshold}: must be >= 0 versions"
            )
        if self.custom_sampler.path or self.custom_sampler.name:
            raise ValueError(
                "trainer.v1.sampler.custom_sampler is not supported: the built-in staleness sampler picks groups "
                "(set custom_sampler.path and .name to null)"
            )


@dataclass
class V1TrainerConfig(BaseConfig):
    """verl's V1 trainer: which loop trains (``trainer_mode``) and its modes' settings (docs/async.md)."""

    # sync: generate, then train (today's loop) | colocate_async: the next batch is generated while this one
    # trains, on the same workers | separate_async: standalone rollout replicas (trainer.backend=ray)
    trainer_mode: str = "sync"
    sync: dict[str, Any] = field(default_factory=dict)  # no settings
    colocate_async: ColocateAsyncConfig = field(default_factory=ColocateAsyncConfig)  # trainer_mode=colocate_async
    separate_async: SeparateAsyncConfig = field(default_factory=SeparateAsyncConfig)  # trainer_mode=separate_async
    sampler: V1SamplerConfig = field(default_factory=V1SamplerConfig)  # staleness control of the async modes
    # partial rollout in the async modes. A trajectory in flight generates this many response tokens per
    # policy version, then resumes under the newest one (its tokens kept and prefilled); 0: a trajectory is
    # sampled whole by the version that started it. Counted in tokens, not at weight syncs (whose timing
    # varies), so the logical schedules stay reproducible (docs/async.md#partial-rollout)
    partial_rollout_tokens: int = 0

    def __post_init__(self):
        if self.partial_rollout_tokens < 0:
            raise ValueError(f"trainer.v1.partial_rollout_tokens={self.partial_rollout_tokens}: must be >= 0")
        if self.trainer_mode not in TRAINER_MODES:
            raise ValueError(
                f"trainer.v1.trainer_mode={self.trainer_mode!r}: use one of {', '.join(TRAINER_MODES)} (docs/async.md)"
            )
        if self.colocate_async.num_warmup_batches < 0:
            raise ValueError(
                f"trainer.v1.colocate_async.num_warmup_batches={self.colocate_async.num_warmup_batches}: must be >= 0"
            )
        if self.separate_async.hybrid_rollout.enable_switch:
            raise ValueError(
                "trainer.v1.separate_async.hybrid_rollout.enable_switch=true is not implemented: trainer workers "
                "are not lent to rollout here (set it to false)"
            )


@dataclass
class AsyncTrainingConfig(BaseConfig):
    """verl's ``async_training`` section, read by its one-step-off and fully-async entry points
    (``verl.experimental.one_step_off_policy.main_ppo``, ``verl.experimental.fully_async_policy.fully_async_main``),
    which map it onto ``trainer.v1`` (docs/async.md#verls-older-entry-points)."""

    # fully async: the fraction of a batch that may come from older versions (docs/async.md says how it maps)
    staleness_threshold: float = 0.1
    trigger_parameter_sync_step: int = 4  # fully async: trainer batches per weight sync
    require_batches: int = 1  # fully async: PPO mini-batches the trainer takes at once
    partial_rollout: bool = True  # fully async: a weight sync cuts generation and resumes it under the new weights
    use_trainer_do_validate: bool = False  # fully async: validation by the trainer's workers
    use_dynamic_resource_scheduling: bool = False  # not implemented (true is an error)
    dynamic_schedule_policy: str = "default"  # with use_dynamic_resource_scheduling only
    dynamic_schedule_deactivate_ratio: float = 0.3  # with use_dynamic_resource_scheduling only
    dynamic_schedule_enable_rebalance: bool = True  # with use_dynamic_resource_scheduling only
    concurrent_samples_per_replica: int = 16  # fully async: requests in flight per rollout replica

    def __post_init__(self):
        if self.use_dynamic_resource_scheduling:
            raise ValueError(
                "async_training.use_dynamic_resource_scheduling=true is not implemented: trainer workers are not "
                "lent to rollout here (set it to false)"
            )


@dataclass
class StandaloneRolloutConfig(BaseConfig):
    """verl's top-level ``rollout`` section of its one-step-off and fully-async entry points: the standalone rollout
    replicas' resources."""

    nnodes: int = 1  # nodes of the standalone rollout (trainer.backend=ray)
    n_gpus_per_node: int = 1  # rollout processes per node (on cpu: one core each); verl's example sets 8
    n: int = 4  # fully async: responses per prompt (verl's key beside actor_rollout_ref.rollout.n)
    total_rollout_steps: int = 100  # fully async: prompts the rollouter generates in all
