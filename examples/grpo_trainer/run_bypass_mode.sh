#!/usr/bin/env bash
# verl's bypass mode (docs/rollout.md#bypass-mode-the-samplers-log-probs-as-the-old-ones): the sampler's log-probs are
# the old ones, so each step skips the actor's old-log-prob pass (20-25% of a CPU step of the built-in task). The
# policy loss then measures the sampler/trainer ratio against the policy being trained, in each micro-batch:
# loss_type=ppo_clip (default) clips it as PPO does; loss_type=reinforce weighs REINFORCE by it (rollout_is) and
# rollout_rs rejects the tokens or responses that drifted too far. The rollout_corr/ metrics show the mismatch.
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_bypass_mode.sh algorithm.rollout_correction.loss_type=reinforce
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    actor_rollout_ref.rollout.calculate_log_probs=true \
    algorithm.rollout_correction.bypass_mode=true \
    algorithm.rollout_correction.loss_type=ppo_clip \
    algorithm.rollout_correction.rollout_rs=seq_max_k3 \
    algorithm.rollout_correction.rollout_rs_threshold=0.5 \
    trainer.total_training_steps=4 \
    trainer.test_freq=2 \
    trainer.save_freq=-1 \
    trainer.experiment_name=bypass-mode-example \
    "$@"
