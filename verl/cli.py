"""The ``verl`` console command: ``verl tune ...`` (more subcommands later). ``verl tune --help`` lists options."""

from __future__ import annotations

import sys

COMMANDS = {"tune": ("verl.trainer.main_tune", "Optuna hyperparameter search over the main job (docs/tune.md)")}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        lines = [f"  {name:8s} {help_}" for name, (_, help_) in COMMANDS.items()]
        msg = "usage: verl COMMAND [options]\n\ncommands:\n" + "\n".join(lines)
        if argv and argv[0] not in ("-h", "--help"):
            sys.exit(f"verl: unknown command {argv[0]!r}\n{msg}")
        print(msg)
        return
    import runpy

    module, _ = COMMANDS[argv[0]]
    sys.argv = [f"verl {argv[0]}", *argv[1:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
