#!/usr/bin/env bash
# GRPO with the Ray backend on GPUs: one FSDP2 rank per GPU (NCCL, bf16 compute).
#   NNODES=1 GPUS=8 MODEL=/models/Qwen2.5-0.5B-Instruct DATA=~/data/gsm8k bash examples/ray/run_grpo_gpu.sh
# Several nodes: `ray start --head` on one, `ray start --address=<head-ip>:6379` on the others, then run this on the
# head with NNODES=<nodes> and ray_init.address=auto appended (and a run directory every node can see).
set -euo pipefail
python -m verl.trainer.main_ppo \
    trainer.backend=ray \
    trainer.device=cuda \
    trainer.nnodes="${NNODES:-1}" \
    trainer.n_gpus_per_node="${GPUS:-8}" \
    actor_rollout_ref.model.path="${MODEL:?set MODEL to a local HF model directory}" \
    data.train_files="${DATA:?set DATA to a directory with train.parquet and test.parquet}/train.parquet" \
    data.val_files="${DATA}/test.parquet" \
    data.max_prompt_length=512 \
    data.max_response_length=512 \
    data.train_batch_size=256 \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.use_kl_loss=true \
    trainer.experiment_name=gsm8k-grpo-ray \
    "$@"
