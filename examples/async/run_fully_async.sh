#!/usr/bin/env bash
# verl's fully-async entry point on the built-in task (docs/async.md): a standalone rollout replica (its own Ray
# process) generates while one trainer process trains, a core each on a 2-core machine. async_training.* maps onto
# trainer.v1.trainer_mode=separate_async: 2 mini-batches of 32 prompts per weight sync make a 64-prompt step, and a
# staleness_threshold above 0 lets the replica run one batch ahead.
# Extra key=value overrides are appended: bash examples/async/run_fully_async.sh trainer.total_training_steps=50
set -euo pipefail
python -m verl.experimental.fully_async_policy.fully_async_main \
    trainer.n_gpus_per_node=1 \
    rollout.nnodes=1 \
    rollout.n_gpus_per_node=1 \
    actor_rollout_ref.actor.ppo_mini_batch_size=32 \
    async_training.trigger_parameter_sync_step=2 \
    async_training.require_batches=1 \
    async_training.staleness_threshold=0.5 \
    trainer.total_training_steps=20 \
    trainer.test_freq=10 \
    trainer.save_freq=-1 \
    trainer.experiment_name=fully-async-example \
    "$@"
