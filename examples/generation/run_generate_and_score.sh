#!/usr/bin/env bash
# Offline generation and scoring, as in public verl: sample 4 responses to every held-out prompt with the shipped warm
# start, write them as parquet, then score the file (test_score/<data_source> and pass@n/<data_source>).
# OUT (default outputs/generation) holds the file; extra key=value overrides go to the generation step.
set -euo pipefail
OUT=${OUT:-outputs/generation}
python3 -m verl.trainer.main_generation \
    model.path=builtin://tiny-qwen2-arith-sft \
    data.path=builtin://arithmetic/test \
    data.prompt_key=prompt \
    data.n_samples=4 \
    data.batch_size=64 \
    data.output_path="$OUT/arithmetic-test-gen.parquet" \
    rollout.temperature=1.0 \
    rollout.top_p=1.0 \
    rollout.prompt_length=64 \
    rollout.response_length=32 \
    "$@"
python3 -m verl.trainer.main_eval \
    data.path="$OUT/arithmetic-test-gen.parquet" \
    data.response_key=responses \
    data.data_source_key=data_source \
    data.reward_model_key=reward_model
