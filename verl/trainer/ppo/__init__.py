"""The PPO-family controller (``ray_trainer``), algorithm core (``core_algos``), metrics and evaluators.

``PPOTrainer`` (the Python API of seed article 000, :mod:`verl.trainer.api`) is imported on first use.
"""

import importlib

__all__ = ["PPOTrainer"]


def __getattr__(name: str):
    if name == "PPOTrainer":
        return importlib.import_module("verl.trainer.api").PPOTrainer
    raise AttributeError(f"module 'verl.trainer.ppo' has no attribute {name!r}")
