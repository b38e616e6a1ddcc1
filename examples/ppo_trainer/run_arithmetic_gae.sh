#!/usr/bin/env bash
# PPO with a critic (GAE) on built-in 2-digit addition from the shipped warm start.
# Extra key=value overrides are appended.
set -euo pipefail
python -m verl.trainer.main_ppo \
    algorithm.adv_estimator=gae \
    algorithm.gamma=1.0 algorithm.lam=1.0 \
    critic.optim.lr=1e-3 \
    actor_rollout_ref.actor.optim.lr=2e-4 \
    trainer.experiment_name=arithmetic-gae-example \
    "$@"
