"""``trainer.v1.trainer_mode=separate_async``: standalone rollout replicas generate while the trainer trains.

The replicas are processes of their own resource pool (`verl.workers.rollout.replica_worker`; verl's top-level
``rollout.nnodes`` x ``rollout.n_gpus_per_node``, one process by default), so generation and training never share
a process: on a 2-core machine ``trainer.n_gpus_per_node=1`` gives the trainer one core and the replica the other.

The schedule is `verl.trainer.ppo.v1.colocate_async`'s, logical rather than wall-clock: round ``r`` is sampled by
the policy version current when round ``r - lag`` was asked for (``lag``: ``separate_async.num_warmup_batches``),
the replicas load each version before the rounds that need it, and a round's sampling keys are fixed by its call and
rows. So a run gives the same bits every time, and the bits of ``colocate_async`` at the same lag (with one torch
thread per process: the thread count changes a CPU's float sums). What that costs against a wall-clock schedule: a
replica that finished every round it may generate waits for the next version instead of sampling with the one it
has; with steady step times the two sides overlap the same either way (docs/async.md has the timeline).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from verl.protocol import DataProto
from verl.utils.ppo_config import runs_agent_loop
from verl.workers.rollout.replica_worker import SAMPLED_BY

__all__ = ["REPLICA_POOL", "ReplicaAgentLoop", "ReplicaEngine", "replica_agent_loop", "replica_concurrency"]

REPLICA_POOL = "rollout_pool"  # the standalone rollout's resource pool (verl's name for it)


class ReplicaEngine:
    """The engine calls `AheadGeneration` makes, served by standalone replicas: versions come from the trainer's
    actor group (its full weights, gathered from the shards), generation from the replica group."""

    def __init__(self, actor_wg: Any, replica_wg: Any):
        self.actor_wg, self.replica_wg = actor_wg, replica_wg
        self._replicas_have_base = False  # a LoRA policy's frozen base is sent once, then adapters alone

    def init_ahead_rollout(self) -> list:
        return [None]

    def policy_weights(self) -> list[dict[str, dict[str, torch.Tensor]]]:
        payload = next(w for w in self.actor_wg.full_policy_weights(not self._replicas_have_base) if w is not None)
        self._replicas_have_base = self._replicas_have_base or "base" in payload
        return [payload]

    def load_ahead_weights(self, weights: dict[str, torch.Tensor], version: int) -> list[float]:
        return [max(self.replica_wg.load_weights(weights, version))]

    def generate_sequences_ahead(self, gen_batch: DataProto) -> DataProto:
        """The replicas' output; ``meta_info["sampled_by"]``: per row, the version that sampled it."""
        out = self.replica_wg.generate_sequences(gen_batch)
        out.meta_info["sampled_by"] = out.non_tensor_batch.pop(SAMPLED_BY)
        return out

    def ahead_rng_state(self) -> list[torch.Tensor]:
        return [self.replica_wg.get_rng_state()[0]]

    def set_ahead_rng_state(self, state: torch.Tensor) -> None:
        self.replica_wg.set_rng_state(state)


class ReplicaAgentLoop:
    """verl's ``async_rollout_manager`` for ``separate_async`` with the agent loop: on the Ray backend the trainer's
    workers serve no per-request generate, so the batches generated on demand (validation, given prompts) run on the
    replicas too, with the trainer's current version (``rounds.generate_now``)."""

    def __init__(self, rounds: Any, current_version: Callable[[], int]):
        self.rounds, self.current_version = rounds, current_version

    @classmethod
    def over(cls, trainer: Any) -> ReplicaAgentLoop | None:
        """The trainer's, when its rounds come from replicas running the agent loop; else None."""
        config = trainer.config
        if config.trainer.v1.trainer_mode != "separate_async" or not runs_agent_loop(config):
            return None
        return cls(trainer.rollout_rounds, lambda: trainer.policy_version)

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        return self.rounds.generate_now(prompts, self.current_version())


def replica_concurrency(config: Any) -> int:
    """Chunks the replicas generate at once. With the agent loop on the wall clock: every chunk alive, ``(1 + lag)``
    batches of ``ppo_mini_batch_size`` prompts, since their model turns batch together on a replica's engine and
    their tool waits overlap; else one (a batch call already uses the replica's cores)."""
    if config.trainer.deterministic or not runs_agent_loop(config):
        return 1
    lag = config.trainer.v1.separate_async.num_warmup_batches
    return max(1, (1 + lag) * config.data.train_batch_size // config.actor_rollout_ref.actor.ppo_mini_batch_size)


def replica_agent_loop(job_config: Any, engine: Any, tokenizer: Any) -> Any:
    """A replica's agent loop: an `AgentLoopWorker` whose one server is the replica's engine (handed to
    `RolloutReplicaWorker` as its ``agent_loop_factory``; the workers layer does not import the agent loop)."""
    from verl.experimental.agent_loop import AgentLoopWorker

    return AgentLoopWorker(job_config, [engine], tokenizer)
