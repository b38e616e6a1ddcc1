#!/usr/bin/env bash
# A GRPO script written for public verl runs here as it is: this is examples/grpo_trainer/run_qwen2-7b.sh's list of
# keys (vLLM engine settings, FSDP offload, verl's deprecated global micro-batch size, ...) with only the model, the
# data and the sizes changed for a 2-core CPU. Engine keys are accepted and change nothing; the deprecated global
# micro-batch sizes become per-worker ones as in verl (with a warning); the rest do what they do in verl
# (docs/config.md, "Porting a verl script"). With the built-in model and data the quickstart recipe fills the keys the
# script leaves out (temperature 0.5, the trust region: docs/recipes.md); with your own model and data, or
# recipe=none, they take verl's defaults. Extra key=value overrides are appended.
set -euo pipefail
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=builtin://arithmetic/train \
    data.val_files=builtin://arithmetic/test \
    data.train_batch_size=64 \
    data.max_prompt_length=64 \
    data.max_response_length=32 \
    data.filter_overlong_prompts=True \
    data.truncation='error' \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    actor_rollout_ref.actor.optim.lr=2e-4 \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.ppo_micro_batch_size=128 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.model.enable_gradient_checkpointing=False \
    actor_rollout_ref.actor.fsdp_config.param_offload=False \
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=128 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.name=hf \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.enable_chunked_prefill=True \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=128 \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    algorithm.use_kl_in_reward=False \
    trainer.critic_warmup=0 \
    trainer.logger='["console","file"]' \
    trainer.project_name='verl_grpo_example_arithmetic' \
    trainer.experiment_name='tiny_qwen2_function_rm' \
    trainer.n_gpus_per_node=1 \
    trainer.nnodes=1 \
    trainer.save_freq=50 \
    trainer.test_freq=10 \
    trainer.total_training_steps=100 \
    "$@"
