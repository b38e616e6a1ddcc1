#!/usr/bin/env bash
# GRPO with LoRA (docs/lora.md): rank-16 adapters on every linear layer of the shipped warm start, the base frozen.
# The reference policy is the same module with its adapters off (no second copy of the model), only the adapters
# carry AdamW state, and each checkpoint holds the adapter alone: global_step_N/actor/lora_adapter/ in PEFT's format
# (PeftModel.from_pretrained(base, dir) loads it; so does any model path here, merged). A full merged model:
#   python -m verl.model_merger merge --backend fsdp --local_dir <run>/global_step_N/actor --target_dir out --merge_lora
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_lora.sh trainer.total_training_steps=20
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    actor_rollout_ref.model.lora_rank=16 \
    actor_rollout_ref.model.lora_alpha=32 \
    actor_rollout_ref.model.target_modules=all-linear \
    actor_rollout_ref.actor.use_kl_loss=true \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    trainer.total_training_steps=100 \
    trainer.save_freq=50 \
    trainer.experiment_name=lora-example \
    "$@"
