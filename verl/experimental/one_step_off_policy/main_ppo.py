"""verl's one-step-off-policy entry point: ``python -m verl.experimental.one_step_off_policy.main_ppo key=value ...``.

Each step trains on the batch the previous policy sampled while the step before trained. Here that is the main job
with verl's one-step-off settings under your overrides (any of them can be overridden):

- ``trainer.v1.trainer_mode=colocate_async`` with ``colocate_async.num_warmup_batches=1``: generation of the next
  batch overlaps this step's training, on a copy of the policy that is one version behind (docs/async.md);
- ``algorithm.rollout_correction.bypass_mode=true`` and ``rollout.calculate_log_probs=true``: the sampler's
  log-probs are the old ones, so the PPO ratio is taken against the policy that really sampled;
- ``rollout.free_cache_engine=false``, as verl's entry point sets it.

verl's top-level ``rollout.nnodes`` / ``rollout.n_gpus_per_node`` (a separate rollout pool) are read and have no
effect on ``trainer.backend=local``, where the rollout shares the trainer's process.
"""

from __future__ import annotations

import sys
from typing import Any

from verl.trainer import main_ppo
from verl.trainer.main_ppo import DiskFullError, SandboxUnavailable, WorkerGroupError
from verl.utils.cli import run_cli

ONE_STEP_OFF = (
    "trainer.v1.trainer_mode=colocate_async",
    "trainer.v1.colocate_async.num_warmup_batches=1",
    "actor_rollout_ref.rollout.calculate_log_probs=true",
    "actor_rollout_ref.rollout.free_cache_engine=false",
    "algorithm.rollout_correction.bypass_mode=true",
)


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return main_ppo.main(args)
    return main_ppo.main([*ONE_STEP_OFF, *args])


if __name__ == "__main__":
    run_cli(main, extra_errors=(WorkerGroupError, ImportError, DiskFullError, SandboxUnavailable))
