"""verl's V1 trainer modes (``trainer.v1.trainer_mode``): the synchronous loop and asynchronous training, where
generation overlaps training (docs/async.md). The controller is `verl.trainer.ppo.ray_trainer.RayPPOTrainer` in
every mode; a mode changes where its batches come from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verl.protocol import DataProto
from verl.trainer.ppo.v1.colocate_async import AheadGeneration
from verl.trainer.ppo.v1.rounds import SyncRounds, new_round
from verl.utils.config import ConfigError

__all__ = ["AheadGeneration", "SyncRounds", "build_rollout_rounds", "check_trainer_mode", "new_round"]


def check_trainer_mode(config: Any) -> None:
    """What a mode needs of the rest of the config, checked before any worker starts (one error naming the keys)."""
    v1 = config.trainer.v1
    mode = v1.trainer_mode
    if mode == "separate_async":
        raise ConfigError(
            "trainer.v1.trainer_mode=separate_async (standalone rollout replicas on trainer.backend=ray) is not built "
            "yet: use trainer.v1.trainer_mode=colocate_async, which overlaps generation with training in one "
            "process (docs/async.md)"
        )
    if mode != "colocate_async":
        return
    lag, sampler = v1.colocate_async.num_warmup_batches, v1.sampler
    if lag > sampler.max_off_policy_threshold:
        raise ConfigError(
            f"trainer.v1.colocate_async.num_warmup_batches={lag} trains every batch {lag} policy versions after it "
            f"was sampled, beyond trainer.v1.sampler.max_off_policy_threshold={sampler.max_off_policy_threshold}: "
            "lower the first or raise the second"
        )
    if config.trainer.backend != "local":
        raise ConfigError(
            "trainer.v1.trainer_mode=colocate_async runs on trainer.backend=local (the ahead engine is a copy of the "
            f"policy in the trainer's process), not trainer.backend={config.trainer.backend}"
        )
    rollout = config.actor_rollout_ref.rollout
    if rollout.name not in ("hf", "naive") or config.actor_rollout_ref.rollout.multi_turn.enable:
        raise ConfigError(
            "trainer.v1.trainer_mode=colocate_async generates with the HF sampler's batch call: set "
            f"actor_rollout_ref.rollout.name=hf and multi_turn.enable=false (here: name={rollout.name}, "
            f"multi_turn.enable={rollout.multi_turn.enable})"
        )


def build_rollout_rounds(
    config: Any, actor_rollout_wg: Any, total_steps: int, generate: Callable[[DataProto], DataProto]
) -> SyncRounds | AheadGeneration:
    """Where the trainer's generation rounds come from: ``generate`` when asked (``sync``), or rounds generated ahead
    (``colocate_async``). Without DAPO's extra rounds one round is one step, so nothing is generated past the run's
    last step."""
    check_trainer_mode(config)
    if config.trainer.v1.trainer_mode != "colocate_async" or actor_rollout_wg is None:
        return SyncRounds(generate)
    max_rounds = None if config.algorithm.filter_groups.enable else total_steps
    return AheadGeneration(actor_rollout_wg, config.trainer.v1.colocate_async.num_warmup_batches, max_rounds)
