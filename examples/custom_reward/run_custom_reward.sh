#!/usr/bin/env bash
# GRPO with a user reward function loaded from a file. Extra key=value overrides are appended.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python -m verl.trainer.main_ppo \
    custom_reward_function.path="$here/length_aware_reward.py" \
    custom_reward_function.name=compute_score \
    +reward_model.reward_kwargs.length_cost=0.002 \
    trainer.experiment_name=arithmetic-custom-reward \
    "$@"
