#!/usr/bin/env bash
# GRPO with the Ray backend on this machine: 2 worker processes (gloo), the actor/reference sharded with FSDP2.
# Starts a local Ray cluster inside the run directory and shuts it down at the end (docs/scaling.md).
# Extra key=value overrides are appended: bash examples/ray/run_grpo_ray_cpu.sh trainer.total_training_steps=20
set -euo pipefail
python -m verl.trainer.main_ppo \
    trainer.backend=ray \
    trainer.device=cpu \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=2 \
    algorithm.adv_estimator=grpo \
    data.train_batch_size=64 \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    trainer.experiment_name=arithmetic-grpo-ray \
    "$@"
