"""``actor_rollout_ref``: the hybrid-engine role group (one model for actor, rollout and reference)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verl.base_config import BaseConfig
from verl.utils.profiler.config import ProfilerConfig
from verl.workers.config.actor import FSDPActorConfig, RefConfig
from verl.workers.config.model import HFModelConfig
from verl.workers.config.rollout import RolloutConfig

__all__ = ["ActorRolloutRefConfig"]


@dataclass
class ActorRolloutRefConfig(BaseConfig):
    """The policy's roles, built in one worker: the actor trains it, the rollout samples with its weights in place,
    the reference keeps a frozen copy for KL terms."""

    hybrid_engine: bool = True  # the rollout samples with the actor's own weights (no copy)
    model: HFModelConfig = field(default_factory=HFModelConfig)  # the policy model
    actor: FSDPActorConfig = field(default_factory=FSDPActorConfig)  # the policy update
    ref: RefConfig = field(default_factory=RefConfig)  # the reference policy
    # the sampler
    rollout: RolloutConfig = field(
        default_factory=RolloutConfig,
        metadata={
            "api": {
                "n": ("DataConfig.responses_per_prompt", "train.responses_per_prompt"),
                "temperature": ("EngineConfig.temperature",),
                "top_p": ("EngineConfig.top_p",),
                "top_k": ("EngineConfig.top_k",),
            }
        },
    )
    # no effect: collective timeout of verl's workers, seconds (here: ray_init.dist_timeout_s; another value warns)
    nccl_timeout: int = 600
    # older verl key (one profiler for the whole role group): no effect, profiling is not wired
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
