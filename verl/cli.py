"""The ``verl`` console command: one subcommand per job, each the same as its ``python -m`` form.

verl ppo trainer.total_training_steps=20      # = python -m verl.trainer.main_ppo trainer.total_training_steps=20
verl ppo --help                               # usage and config sections; --help SECTION lists its keys
verl sft --cfg job                            # the resolved config, without running
"""

from __future__ import annotations

import sys

# subcommand -> (module run as __main__, one line of help)
COMMANDS: dict[str, tuple[str, str]] = {
    "ppo": ("verl.trainer.main_ppo", "PPO-family RL: GRPO, PPO, RLOO, REINFORCE++, ReMax, DAPO (docs/ppo.md)"),
    "sft": ("verl.trainer.main_sft", "supervised fine-tuning, the warm start for RL (docs/sft.md)"),
    "eval": ("verl.trainer.main_eval", "score a generated file, or a model's held-out accuracy (docs/sft.md)"),
    "generate": (
        "verl.trainer.main_generation",
        "n responses per prompt of a parquet, to parquet (docs/generation.md)",
    ),
    "tune": ("verl.trainer.main_tune", "Optuna hyperparameter search over the main job (docs/tune.md)"),
    "merge": ("verl.model_merger", "a checkpoint's shards as a plain HF model directory (docs/scaling.md)"),
    "tasks": ("verl.data.tasks", "write a built-in task's data as verl parquet (docs/data.md)"),
    "tiny-model": ("verl.models.tiny", "build and save a tiny Qwen2/Llama model and tokenizer (docs/models.md)"),
    "auto-config": (
        "verl.planner",
        "plan per-GPU memory, rollout TP, micro-batches and offload; writes overrides (docs/auto_config.md)",
    ),
    "diagnose": ("verl.diagnose", "is this machine ready? each check PASS/WARN/FAIL with the fix (docs/diagnose.md)"),
}


def usage() -> str:
    lines = [f"  {name:11s} {help_}" for name, (_, help_) in COMMANDS.items()]
    return (
        "usage: verl COMMAND [options]\n\ncommands (each is its python -m module; verl COMMAND --help for its "
        "options):\n" + "\n".join(lines)
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    if argv[0] not in COMMANDS:
        sys.exit(f"verl: unknown command {argv[0]!r}\n{usage()}")
    import runpy

    from verl.utils import cli

    module, _ = COMMANDS[argv[0]]
    cli.COMMAND_NAME = f"verl {argv[0]}"
    sys.argv = [cli.COMMAND_NAME, *argv[1:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
