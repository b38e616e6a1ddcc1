#!/usr/bin/env bash
# The agent loop in trainer.v1.trainer_mode=separate_async (docs/async.md#the-agent-loop): the built-in calculator
# task from its shipped tool-calling warm start, with the slow calculator (each call waits a seeded 0.2-3 s, a
# stand-in for a sandbox or a web tool). The rollout replica (its own Ray process) runs the agent loops, tools
# included, every live chunk at once so the waits overlap, while one trainer process trains; a core each.
# Extra key=value overrides are appended: bash examples/async/run_separate_async_tool.sh trainer.total_training_steps=50
set -euo pipefail
python -m verl.trainer.main_ppo \
    trainer.backend=ray \
    trainer.n_gpus_per_node=1 \
    trainer.v1.trainer_mode=separate_async \
    trainer.v1.separate_async.parameter_sync_step=2 \
    actor_rollout_ref.model.path=builtin://tiny-qwen2-calc-sft \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.multi_turn.enable=true \
    actor_rollout_ref.rollout.multi_turn.tool_config_path=examples/agent_loop/tool_configs/slow_calculator.yaml \
    actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent \
    data.train_files='builtin://calc_multiply/train?train_size=20000' \
    data.val_files='builtin://calc_multiply/test?size=200' \
    data.max_prompt_length=96 \
    data.max_response_length=128 \
    data.train_batch_size=16 \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    trainer.total_training_steps=20 \
    trainer.test_freq=10 \
    trainer.save_freq=-1 \
    trainer.experiment_name=separate-async-tool-example \
    "$@"
