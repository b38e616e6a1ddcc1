#!/usr/bin/env bash
# verl's V1 trainer mode colocate_async on the built-in task (docs/async.md): the next batch is generated while this
# one trains; num_warmup_batches is how many versions behind the sampler runs (0: the bits of trainer_mode=sync),
# and max_off_policy_threshold bounds it. The decoupled rollout correction weighs each token by how much more
# likely the trained policy finds it than the older policy that sampled it (capped), so the update stays on-policy
# in expectation. training/off_policy/* shows the staleness; async/* the queue and the rollout's idle time.
# Extra key=value overrides are appended: bash examples/async/run_colocate_async.sh trainer.v1.colocate_async.num_warmup_batches=2
set -euo pipefail
python -m verl.trainer.main_ppo \
    trainer.v1.trainer_mode=colocate_async \
    trainer.v1.colocate_async.num_warmup_batches=1 \
    trainer.v1.sampler.max_off_policy_threshold=2 \
    actor_rollout_ref.rollout.calculate_log_probs=true \
    algorithm.rollout_correction.rollout_is=token \
    algorithm.rollout_correction.rollout_is_threshold=2.0 \
    trainer.num_threads=1 \
    trainer.total_training_steps=20 \
    trainer.test_freq=10 \
    trainer.save_freq=-1 \
    trainer.experiment_name=colocate-async-example \
    "$@"
