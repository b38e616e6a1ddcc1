#!/usr/bin/env bash
# Hyperparameter search over the main job with PPOTrainer's five hyperparameters (examples/tune/search_space.yaml;
# docs/tune.md#the-default-search-space).
# Small budget per trial; resume by running the same command again. Extra key=value arguments are passed on,
# e.g. `bash examples/tune/run_tune.sh --n-trials 2 trainer.total_training_steps=2` for a smoke test.
set -euo pipefail
cd "$(dirname "$0")/../.."
python -m verl.trainer.main_tune \
    --search-space examples/tune/search_space.yaml \
    --study-name arithmetic-grpo-tune \
    --n-trials 12 --trial-timeout 600 --pruner median \
    --early-stop 'eval/reward_std<0.05:3' \
    trainer.total_training_steps=20 trainer.test_freq=5 \
    "$@"
