#!/usr/bin/env bash
# Update-size control on a task of your own (docs/ppo.md#update-size-control-actortrust_region): GRPO on 2-digit
# subtraction from the addition warm start, with a learning rate far above what the task tolerates (1e-3). The
# trust region takes that rate as a ceiling: it starts at 0.1 x it and moves the rate so that each mini-batch step
# changes the policy by about target_kl (KL per response token, measured against the policy that sampled the batch;
# see actor/policy_drift_kl, actor/lr_scale and actor/lr in the metrics): down by lr_factor on a reading over the
# band, up by lr_increase_factor on one under it. A script that sets its own optim.lr gets
# verl's fixed rate unless it turns the control on, as here.
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_trust_region.sh trainer.total_training_steps=20
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    "data.train_files=builtin://arithmetic/train?ops=-" \
    "data.val_files=builtin://arithmetic/test?ops=-&size=100" \
    actor_rollout_ref.actor.optim.lr=1e-3 \
    actor_rollout_ref.actor.trust_region.enable=true \
    actor_rollout_ref.actor.trust_region.target_kl=0.0005 \
    actor_rollout_ref.actor.trust_region.initial_lr_ratio=0.1 \
    actor_rollout_ref.actor.trust_region.lr_factor=1.5 \
    actor_rollout_ref.actor.trust_region.lr_increase_factor=1.1 \
    trainer.total_training_steps=4 \
    trainer.test_freq=2 \
    trainer.save_freq=-1 \
    trainer.experiment_name=trust-region-example \
    "$@"
