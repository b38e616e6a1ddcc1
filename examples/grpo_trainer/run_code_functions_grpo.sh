#!/usr/bin/env bash
# GRPO on the built-in code task from the shipped code warm start: every response is a Python program, run against
# its problem's 5 hidden test cases in the local sandbox (bubblewrap: apt-get install bubblewrap); its reward is the
# share passed. A prompt's 8 programs are judged in one sandbox run, in 2 scoring threads. docs/code_rl.md.
# Extra key=value overrides are appended: bash examples/grpo_trainer/run_code_functions_grpo.sh trainer.total_training_steps=20
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-code-sft \
    data.train_files=builtin://code_functions/train \
    "data.val_files=builtin://code_functions/test?size=100" \
    data.max_prompt_length=160 \
    data.max_response_length=96 \
    reward_model.num_workers=2 \
    trainer.total_training_steps=120 \
    trainer.test_freq=10 \
    trainer.experiment_name=code-functions-grpo-example \
    "$@"
