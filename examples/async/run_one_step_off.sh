#!/usr/bin/env bash
# verl's one-step-off-policy entry point on the built-in task (docs/async.md): each step trains on the batch the
# previous policy sampled while the step before trained, on a copy of the policy one version behind. One torch thread
# per side: the trainer's thread and the rollout's thread each get a core of a 2-core machine.
# Extra key=value overrides are appended: bash examples/async/run_one_step_off.sh trainer.total_training_steps=50
set -euo pipefail
python -m verl.experimental.one_step_off_policy.main_ppo \
    trainer.num_threads=1 \
    trainer.total_training_steps=20 \
    trainer.test_freq=10 \
    trainer.save_freq=-1 \
    trainer.experiment_name=one-step-off-example \
    "$@"
