"""verl's V1 trainer modes (``trainer.v1.trainer_mode``): the synchronous loop and asynchronous training, where
generation overlaps training (docs/async.md). The controller is `verl.trainer.ppo.ray_trainer.RayPPOTrainer` in
every mode; a mode changes where its batches come from."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from verl.protocol import DataProto
from verl.trainer.ppo.v1.colocate_async import AheadGeneration
from verl.trainer.ppo.v1.rounds import SyncRounds, new_round
from verl.trainer.ppo.v1.separate_async import REPLICA_POOL, ReplicaAgentLoop, ReplicaEngine, replica_concurrency
from verl.trainer.ppo.v1.streaming import StreamingRollout
from verl.utils.config import ConfigError
from verl.utils.ppo_config import runs_agent_loop, uses_agent_loop

__all__ = [
    "REPLICA_POOL",
    "AheadGeneration",
    "ReplicaAgentLoop",
    "ReplicaEngine",
    "SyncRounds",
    "build_rollout_rounds",
    "check_trainer_mode",
    "new_round",
    "runs_agent_loop",
]


def check_trainer_mode(config: Any) -> None:
    """What a mode needs of the rest of the config, checked before any worker starts (one error naming the keys)."""
    v1 = config.trainer.v1
    mode = v1.trainer_mode
    if mode == "sync":
        return
    lag, sampler = getattr(v1, mode).num_warmup_batches, v1.sampler
    if lag < 0:
        raise ConfigError(f"trainer.v1.{mode}.num_warmup_batches={lag}: must be >= 0")
    # the logical schedules train every batch exactly `lag` versions late; the wall clock drops stale groups instead
    # (wait keeps them, so there too the lag must fit under the threshold)
    bounded = mode == "colocate_async" or config.trainer.deterministic or sampler.max_off_policy_strategy == "wait"
    if bounded and lag > sampler.max_off_policy_threshold:
        raise ConfigError(
            f"trainer.v1.{mode}.num_warmup_batches={lag} trains every batch {lag} policy versions after it "
            f"was sampled, beyond trainer.v1.sampler.max_off_policy_threshold={sampler.max_off_policy_threshold}: "
            "lower the first or raise the second"
        )
    backend = "local" if mode == "colocate_async" else "ray"
    if config.trainer.backend != backend:
        where = "a copy of the policy in the trainer's process" if backend == "local" else "their own processes"
        raise ConfigError(
            f"trainer.v1.trainer_mode={mode} runs on trainer.backend={backend} (its rollout is {where}), not "
            f"trainer.backend={config.trainer.backend}"
        )
    rollout = config.actor_rollout_ref.rollout
    if rollout.name not in ("hf", "naive"):
        raise ConfigError(
            f"trainer.v1.trainer_mode={mode} generates with the HF sampler: set actor_rollout_ref.rollout.name=hf "
            f"(here: {rollout.name})"
        )
    if runs_agent_loop(config) and v1.partial_rollout_tokens:
        raise ConfigError(
            f"trainer.v1.partial_rollout_tokens={v1.partial_rollout_tokens} cuts the HF sampler's batch call; "
            "agent-loop trajectories (actor_rollout_ref.rollout.multi_turn.enable) are not cut yet: set it to 0"
        )
    if mode == "separate_async":
        sync_step, mini = v1.separate_async.parameter_sync_step, config.actor_rollout_ref.actor.ppo_mini_batch_size
        if config.data.train_batch_size != sync_step * mini:
            raise ConfigError(
                f"trainer.v1.trainer_mode=separate_async syncs the weights every "
                f"trainer.v1.separate_async.parameter_sync_step={sync_step} PPO mini-batches of "
                f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}, so data.train_batch_size must be their product "
                f"({sync_step * mini}), not {config.data.train_batch_size}"
            )


def build_rollout_rounds(
    config: Any,
    actor_rollout_wg: Any,
    total_steps: int,
    generate: Callable[[DataProto], DataProto],
    replica_wg: Any = None,
) -> SyncRounds | AheadGeneration | StreamingRollout:
    """Where the trainer's generation rounds come from: ``generate`` when asked (``sync``); rounds generated ahead by
    the ahead engine (``colocate_async``), or by the standalone replicas of ``replica_wg`` (``separate_async`` with
    ``trainer.deterministic=true``), on the logical schedule (without DAPO's extra rounds one round is one step, so
    nothing is generated past the run's last step); or prompt groups streamed through the replicas on the wall clock
    (``separate_async``)."""
    check_trainer_mode(config)
    mode = config.trainer.v1.trainer_mode
    if mode == "sync" or actor_rollout_wg is None:
        return SyncRounds(generate)
    max_rounds = None if config.algorithm.filter_groups.enable else total_steps
    lag = getattr(config.trainer.v1, mode).num_warmup_batches
    partial = {"partial_tokens": config.trainer.v1.partial_rollout_tokens}
    partial["response_length"] = config.actor_rollout_ref.rollout.response_length
    if mode == "colocate_async":
        agent = _ahead_agent_loop(config) if uses_agent_loop(config) else None
        return AheadGeneration(actor_rollout_wg, lag, max_rounds, **partial, agent_loop=agent)
    engine = ReplicaEngine(actor_rollout_wg, replica_wg)
    partial["agent_keys"] = runs_agent_loop(config)  # the replicas run the agent loop
    if config.trainer.deterministic:  # the logical schedule: the bits of colocate_async at the same lag
        agent_rng = random.Random(f"agent-keys-{config.trainer.seed}")  # the driver's global one is Ray's too
        return AheadGeneration(engine, lag, max_rounds, **partial, agent_rng=agent_rng)
    a = config.actor_rollout_ref
    sizes = (config.data.train_batch_size, a.actor.ppo_mini_batch_size, a.rollout.n)
    return StreamingRollout(
        engine, config.trainer.v1.sampler, lag, *sizes, **partial, feeders=replica_concurrency(config)
    )


def _ahead_agent_loop(config: Any) -> Callable[[Any], Any]:
    """The agent loop of ``colocate_async``: an `AgentLoopWorker` whose one server is the ahead engine (its
    per-request ``generate`` samples with the engine's copy of the policy)."""
    from verl.experimental.agent_loop import AgentLoopWorker

    return lambda wg: AgentLoopWorker(config, [wg.ahead_rollout.engine])
