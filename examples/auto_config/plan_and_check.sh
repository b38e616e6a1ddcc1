#!/usr/bin/env bash
# Plan before you run (docs/auto_config.md).
# 1. The memory planner: per-GPU memory of each phase of a step for a 7B model on 8 x A100 80 GB doing code RL, the
#    recommended rollout TP, gpu_memory_utilization, token budgets, offload and checkpointing, and an override file
#    for main_ppo (PLAN, default outputs/auto_config/plan.yaml). On the cluster:
#      python -m verl.trainer.main_ppo --config $PLAN actor_rollout_ref.model.path=<model dir> data.train_files=...
# 2. Here: the default job with trainer.check_memory=true, which checks the planner's estimate of this run's peak
#    against this machine's free memory before any model is read. Extra key=value overrides go to this run:
#      bash examples/auto_config/plan_and_check.sh trainer.total_training_steps=5
set -euo pipefail
PLAN=${PLAN:-outputs/auto_config/plan.yaml}
python scripts/auto_config.py --model_size 7b --gpu_type a100 --num_gpus 8 --task code-generation --output "$PLAN"
python -m verl.trainer.main_ppo trainer.check_memory=true "$@"
