#!/usr/bin/env bash
# The collapse guard at work: GRPO on built-in addition with a learning rate far too large (0.3) destroys the warm
# start in a step. The run says so in one line (COLLAPSE at step N: held-out val-core/acc ... below its best ...),
# and with trainer.rollback_on_collapse=true it reloads the best validation's policy (kept in best_val/) and halves
# the learning rate, again while it stays collapsed. docs/ppo.md#the-collapse-guard.
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_collapse_rollback.sh trainer.total_training_steps=6
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    "data.train_files=builtin://arithmetic/train?train_size=64" \
    "data.val_files=builtin://arithmetic/test?test_size=32" \
    data.train_batch_size=8 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.optim.lr=0.3 \
    actor_rollout_ref.actor.trust_region.enable=false \
    trainer.total_training_steps=3 \
    trainer.test_freq=1 \
    trainer.save_freq=-1 \
    trainer.rollback_on_collapse=true \
    trainer.rollback_lr_factor=0.5 \
    trainer.experiment_name=collapse-rollback-example \
    "$@"
