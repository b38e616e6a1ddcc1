"""verl's fully-async entry point: ``python -m verl.experimental.fully_async_policy.fully_async_main key=value ...``.

Standalone rollout replicas generate while the trainer trains. Here that is the main job in
``trainer.v1.trainer_mode=separate_async`` on the Ray backend (docs/async.md), with verl's ``async_training.*`` keys
mapped onto it:

- ``trigger_parameter_sync_step`` x ``require_batches`` PPO mini-batches per weight sync become
  ``trainer.v1.separate_async.parameter_sync_step``, and ``data.train_batch_size`` their prompts (verl streams
  prompts one at a time, ``data.gen_batch_size=1``, and does not read it);
- ``staleness_threshold`` (the fraction of a batch that may be sampled by older weights) becomes the lag in whole
  batches, ``num_warmup_batches``: 0 for 0, else the threshold rounded up (0.1 -> 1: one batch ahead);
- ``partial_rollout`` (verl's default: true) becomes ``trainer.v1.partial_rollout_tokens``: a quarter of
  ``rollout.response_length`` per segment, so a weight sync reaches a trajectory in flight within that many tokens
  and it resumes under the new version (a value set on the command line wins);
- verl's settings for the mode: ``algorithm.rollout_correction.bypass_mode=true``,
  ``rollout.calculate_log_probs=true``.

verl's top-level ``rollout.nnodes`` x ``rollout.n_gpus_per_node`` is the replicas' pool (one process each on CPU).
Every key can still be overridden on the command line.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from verl.trainer import main_ppo
from verl.trainer.main_ppo import DiskFullError, SandboxUnavailable, WorkerGroupError
from verl.utils.cli import run_cli
from verl.utils.config import load_config

FULLY_ASYNC = (
    "trainer.backend=ray",
    "trainer.v1.trainer_mode=separate_async",
    "actor_rollout_ref.rollout.calculate_log_probs=true",
    "algorithm.rollout_correction.bypass_mode=true",
)


def mapped_overrides(config: Any) -> list[str]:
    """The ``trainer.v1`` and batch keys that ``config``'s ``async_training`` section stands for."""
    a = config.async_training
    if a.trigger_parameter_sync_step < 1 or a.require_batches < 1:
        raise ValueError(
            f"async_training.trigger_parameter_sync_step={a.trigger_parameter_sync_step} and "
            f"async_training.require_batches={a.require_batches}: both must be >= 1"
        )
    if a.staleness_threshold < 0:
        raise ValueError(f"async_training.staleness_threshold={a.staleness_threshold}: must be >= 0")
    sync_step = a.trigger_parameter_sync_step * a.require_batches
    lag = math.ceil(a.staleness_threshold)
    partial = config.trainer.v1.partial_rollout_tokens
    if a.partial_rollout and not partial:
        partial = max(1, config.actor_rollout_ref.rollout.response_length // 4)
    return [
        f"trainer.v1.partial_rollout_tokens={partial}",
        f"trainer.v1.separate_async.parameter_sync_step={sync_step}",
        f"data.train_batch_size={sync_step * config.actor_rollout_ref.actor.ppo_mini_batch_size}",
        f"trainer.v1.separate_async.num_warmup_batches={lag}",
        f"trainer.v1.sampler.max_off_policy_threshold={max(lag, config.trainer.v1.sampler.max_off_policy_threshold)}",
    ]


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return main_ppo.main(args)
    base = [*FULLY_ASYNC, *args]
    loaded = load_config("ppo_trainer", base)
    derived = mapped_overrides(loaded)
    print(f"fully_async: {' '.join(derived)}", flush=True)
    return main_ppo.main([*base, *derived])


if __name__ == "__main__":
    run_cli(main, extra_errors=(WorkerGroupError, ImportError, DiskFullError, SandboxUnavailable))
