#!/usr/bin/env bash
# GRPO on built-in 2-digit addition from the shipped warm start (the default main job, spelled out).
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_arithmetic_grpo.sh trainer.total_training_steps=20
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=builtin://arithmetic/train \
    data.val_files=builtin://arithmetic/test \
    data.train_batch_size=64 \
    data.max_response_length=32 \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.optim.lr=2e-4 \
    trainer.experiment_name=arithmetic-grpo-example \
    "$@"
