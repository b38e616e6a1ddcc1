#!/usr/bin/env bash
# The plateau rule on a task of your own (docs/ppo.md#the-plateau-rule-trainerlr_plateau): GRPO on 2-digit
# subtraction from the addition warm start, validated every 5 steps on 200 held-out problems. After two validations
# in a row without a new best, the run reloads the best validation's policy and halves the learning rate (one line,
# PLATEAU at step N: ...; plateau/cuts and collapse/lr_scale in the metrics). initial_scale=0.125 with growth=2 makes
# it a bold driver: it starts at an eighth of the rate and doubles it at each new best, up to the configured rate.
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_lr_plateau.sh trainer.total_training_steps=60
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft \
    "data.train_files=builtin://arithmetic/train?ops=-" \
    "data.val_files=builtin://arithmetic/test?ops=-&size=200" \
    trainer.lr_plateau.enable=true \
    trainer.lr_plateau.patience=2 \
    trainer.lr_plateau.factor=0.5 \
    trainer.lr_plateau.initial_scale=0.125 \
    trainer.lr_plateau.growth=2 \
    trainer.total_training_steps=40 \
    trainer.test_freq=5 \
    trainer.save_freq=-1 \
    trainer.experiment_name=lr-plateau-example \
    "$@"
